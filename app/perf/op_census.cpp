#include "app/perf/op_census.h"

#include "app/perf/plain_loop.h"

#include <ATen/record_function.h>
#include <torch/torch.h>
#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

namespace shardscope::perf {

namespace {

// The observer's state: function pointers take no capture, and autograd runs a CUDA backward on
// a thread of its own, so the counts are shared and the nesting depth is per thread.
std::mutex census_mutex;
std::map<std::string, int64_t>* counting = nullptr;  // where top-level ops go; null: none
double* counting_flops = nullptr;                    // top-level matmuls' FLOPs; null: none
std::thread::id counting_thread;  // whose top-level ops count (another thread's are not ours)
thread_local int depth = 0;

// 2 m n k of a matmul [..., m, k] x [..., k, n]: twice the first's elements times n.
double matmul_flops(const at::RecordFunction& fn) {
  const auto inputs = fn.inputs();
  if (inputs.size() < 2 || !inputs[0].isTensor() || !inputs[1].isTensor()) return 0;
  const at::Tensor& a = inputs[0].toTensor();
  const at::Tensor& b = inputs[1].toTensor();
  if (b.dim() < 2) return 0;
  return 2.0 * double(a.numel()) * double(b.size(-1));
}

std::unique_ptr<at::ObserverContext> op_begins(const at::RecordFunction& fn) {
  const bool node = fn.scope() == at::RecordScope::BACKWARD_FUNCTION;
  if (depth++ == 0 || node) {
    const std::string name = fn.name();
    std::lock_guard<std::mutex> lock(census_mutex);
    if (counting == nullptr || (!node && std::this_thread::get_id() != counting_thread))
      return nullptr;
    ++(*counting)[name];
    if (counting_flops != nullptr && !node && name == "aten::matmul")
      *counting_flops += matmul_flops(fn);
  }
  return nullptr;
}

void op_ends(const at::RecordFunction&, at::ObserverContext*) {
  --depth;
}

// Counts, into `names`, what `fn` dispatches at the top level; backward nodes are counted at any
// depth (autograd's engine calls them from within backward()).
template <typename Fn>
void count_into(std::map<std::string, int64_t>& names, double* flops, Fn&& fn) {
  const auto stop = [] {
    std::lock_guard<std::mutex> lock(census_mutex);
    counting = nullptr;
    counting_flops = nullptr;
  };
  {
    std::lock_guard<std::mutex> lock(census_mutex);
    // The observer's state is the process's: one census at a time.
    if (counting != nullptr) throw std::logic_error("a census of operators is already counting");
    counting = &names;
    counting_flops = flops;
    counting_thread = std::this_thread::get_id();
  }
  auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(op_begins, op_ends)
          .needsInputs(flops != nullptr)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  try {
    fn();
  } catch (...) {
    at::removeCallback(handle);
    stop();
    throw;
  }
  at::removeCallback(handle);
  stop();
}

int64_t total(const std::map<std::string, int64_t>& names) {
  int64_t n = 0;
  for (const auto& [name, count] : names) n += count;
  return n;
}

}  // namespace

bool is_view_op(const std::string& name) {
  static const std::set<std::string> views = {
      "aten::view",           "aten::_unsafe_view", "aten::reshape",
      "aten::_reshape_alias", "aten::transpose",    "aten::t",
      "aten::permute",        "aten::unsqueeze",    "aten::squeeze",
      "aten::expand",         "aten::slice",        "aten::select",
      "aten::split",          "aten::chunk",        "aten::unbind",
      "aten::narrow",         "aten::as_strided",   "aten::detach",
      "aten::alias",          "aten::flatten",      "aten::unflatten",
      "aten::view_as",        "aten::expand_as",    "aten::split_with_sizes"};
  return views.count(name) > 0;
}

OpCensus census_of_step(const Config& c) {
  PlainLoop loop(c);
  OpCensus census;
  for (int step = 0; step < 2; ++step) {
    const bool counted = step == 1;
    std::map<std::string, int64_t> forward, backward, optimizer_ops;
    loop.step(step, [&](PlainLoop::Phase phase, const std::function<void()>& fn) {
      if (!counted) return fn();
      switch (phase) {
        case PlainLoop::Phase::kForward:
          return count_into(forward, &census.forward_matmul_flops, fn);
        case PlainLoop::Phase::kBackward:
          return count_into(backward, nullptr, fn);
        case PlainLoop::Phase::kOptimizer:
          return count_into(optimizer_ops, nullptr, fn);
      }
    });
    if (!counted) continue;
    census.forward_names = forward;
    census.forward_ops = total(forward);
    for (const auto& [name, count] : forward)
      if (is_view_op(name)) census.forward_views += count;
    // Autograd records each node twice, as "autograd::engine::evaluate_function: XBackward0"
    // around "XBackward0"; backward() itself and the ops nodes call are not nodes.
    const std::string evaluate = "autograd::engine::evaluate_function: ";
    for (const auto& [name, count] : backward) {
      if (name.rfind(evaluate, 0) == 0) continue;
      if (name.find("Backward") == std::string::npos && name != "torch::autograd::AccumulateGrad")
        continue;
      census.backward_names[name] = count;
      census.backward_nodes += count;
    }
    census.optimizer_names = optimizer_ops;
    census.optimizer_ops = total(optimizer_ops);
  }
  return census;
}

}  // namespace shardscope::perf
