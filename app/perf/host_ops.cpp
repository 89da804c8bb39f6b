// What the host spends to dispatch one operator of each kind, in C++ through LibTorch, on the
// device asked for (issue 34: a small model on a GPU is bound by it, and the projection prices
// it by kind): a view, a kernel-launching operator with and without autograd recording, a
// matmul, one autograd node in backward, and AdamW's step for one parameter tensor. Then the
// census of our GPT's own step (op_census.h), per block, for the projection to be checked
// against. Tensors are tiny, so on a GPU the device keeps up and the host's time is what is
// timed; on a CPU the kernels run inline and are timed with it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "app/perf/op_census.h"
#include "app/perf/perf_suite.h"
#include "engine/train/config.h"

namespace shardscope::perf {

namespace {

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? 0 : device.index());
}

// Host microseconds per call of `fn` (which dispatches `ops_per_call` operators), the median of
// five batches of `calls`, each batch started on an idle device and timed before it is waited for.
double host_us_per_op(const c10::Device& device, int calls, int ops_per_call,
                      const std::function<void()>& fn) {
  fn();
  synchronize(device);
  std::vector<double> us;
  for (int batch = 0; batch < 5; ++batch) {
    synchronize(device);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    const auto t1 = std::chrono::steady_clock::now();
    synchronize(device);
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() /
                 (double(calls) * ops_per_call));
  }
  return median(us);
}

PerfRow figure(const std::string& what, double value, const std::string& unit,
               const std::string& note = "") {
  PerfRow row;
  row.section = "host-ops";
  row.what = what;
  row.ours = value;
  row.unit = unit;
  row.note = note;
  return row;
}

void measure_dispatch(const c10::Device& device, int calls, std::vector<PerfRow>& rows) {
  const auto on = torch::TensorOptions().device(device);
  auto x = torch::randn({64, 64}, on);
  auto w = torch::randn({64, 64}, on);
  torch::NoGradGuard no_grad;
  rows.push_back(figure("view (x.view, x.transpose)",
                        host_us_per_op(device, calls, 2,
                                       [&] {
                                         auto v = x.view({32, 128});
                                         auto t = x.transpose(0, 1);
                                       }),
                        "us/op"));
  rows.push_back(figure("elementwise kernel (add_), no autograd",
                        host_us_per_op(device, calls, 1, [&] { x.add_(1e-6); }), "us/op"));
  rows.push_back(figure("matmul (linear 64x64)",
                        host_us_per_op(device, calls, 1, [&] { auto y = torch::linear(x, w); }),
                        "us/op"));
  // What a backward's MmBackward0 calls: mm alone, without linear's transpose and bias.
  rows.push_back(figure("matmul (mm 64x64), as backward calls it",
                        host_us_per_op(device, calls, 1, [&] { auto y = torch::mm(x, w); }),
                        "us/op"));
}

void measure_autograd(const c10::Device& device, int calls, std::vector<PerfRow>& rows) {
  const auto on = torch::TensorOptions().device(device);
  auto leaf = torch::randn({64, 64}, on.requires_grad(true));
  constexpr int kChain = 32;
  // The forward of a chain: each mul records its node.
  rows.push_back(figure("elementwise kernel (mul), recording autograd",
                        host_us_per_op(device, calls / kChain, kChain,
                                       [&] {
                                         auto h = leaf;
                                         for (int i = 0; i < kChain; ++i) h = h * 1.0001;
                                       }),
                        "us/op"));
  // Its backward: kChain MulBackward0 nodes (a kernel each), SumBackward0 (an expand, no kernel)
  // and AccumulateGrad (the gradient taken as it is), over all kChain + 2.
  std::vector<double> us;
  for (int rep = 0; rep < 7; ++rep) {
    auto h = leaf;
    for (int i = 0; i < kChain; ++i) h = h * 1.0001;
    auto loss = h.sum();
    synchronize(device);
    const auto t0 = std::chrono::steady_clock::now();
    loss.backward();
    const auto t1 = std::chrono::steady_clock::now();
    synchronize(device);
    if (rep > 0)
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / (kChain + 2));
  }
  rows.push_back(figure("autograd node in backward (MulBackward0)", median(us), "us/op",
                        "backward() of a chain of 32 muls over its 34 nodes"));
}

void measure_optimizer(const c10::Device& device, int calls, std::vector<PerfRow>& rows) {
  const auto on = torch::TensorOptions().device(device);
  std::vector<torch::Tensor> params;
  for (int i = 0; i < 64; ++i) {
    params.push_back(torch::randn({64}, on).requires_grad_(true));
    params.back().mutable_grad() = torch::randn({64}, on);
  }
  torch::optim::AdamW adamw(params, torch::optim::AdamWOptions(1e-4).weight_decay(0.1));
  rows.push_back(figure("AdamW step, one parameter tensor",
                        host_us_per_op(device, std::max(1, calls / 64), 64, [&] { adamw.step(); }),
                        "us/tensor"));
}

// "aten::linear x4, aten::view x2, ...": what `two` holds beyond `one`, most first.
std::string names_beyond(const std::map<std::string, int64_t>& two,
                         const std::map<std::string, int64_t>& one, double per = 1) {
  std::vector<std::pair<double, std::string>> extra;
  for (const auto& [name, count] : two) {
    const auto it = one.find(name);
    const double n = double(count - (it == one.end() ? 0 : it->second)) / per;
    if (n > 0) extra.emplace_back(n, name);
  }
  std::sort(extra.begin(), extra.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::string out;
  for (const auto& [n, name] : extra) {
    char count[32];
    std::snprintf(count, sizeof(count), " x%g", n);
    out += (out.empty() ? "" : ", ") + name + count;
  }
  return out;
}

void census_rows(const PerfOptions& options, std::vector<PerfRow>& rows) {
  // Per block: the census of two blocks less that of one.
  OpCensus one, two;
  for (int layers : {1, 2}) {
    Config config =
        config_from_json(nlohmann::json{{"strategy", "single"},
                                        {"preset", "tiny"},
                                        {"device", options.device},
                                        {"model", {{"layers", layers}}},
                                        {"strategy_options", {{"precision", options.precision}}}});
    finalize(config);
    (layers == 1 ? one : two) = census_of_step(config);
  }
  const std::string where = " (" + options.precision + ")";
  rows.push_back(
      figure("forward: operators a block" + where, double(two.forward_ops - one.forward_ops), "ops",
             std::to_string(two.forward_views - one.forward_views) + " of them views; " +
                 std::to_string(one.forward_ops) +
                 " at one block: " + names_beyond(two.forward_names, one.forward_names)));
  rows.push_back(figure("backward: autograd nodes a block" + where,
                        double(two.backward_nodes - one.backward_nodes), "nodes",
                        std::to_string(one.backward_nodes) + " at one block: " +
                            names_beyond(two.backward_names, one.backward_names)));
  rows.push_back(figure("optimizer: operators a parameter tensor" + where,
                        double(two.optimizer_ops - one.optimizer_ops) / 12.0, "ops",
                        "12 parameter tensors a block: " +
                            names_beyond(two.optimizer_names, one.optimizer_names, 12.0)));
}

}  // namespace

void measure_host_ops(const PerfOptions& options, std::vector<PerfRow>& rows) {
  const c10::Device device(options.device);
  const int calls = options.quick ? 256 : 4096;
  if (options.progress) options.progress("  dispatch of one operator of each kind");
  measure_dispatch(device, calls, rows);
  measure_autograd(device, calls, rows);
  measure_optimizer(device, calls, rows);
  if (options.progress) options.progress("  census of our GPT's step");
  census_rows(options, rows);
}

}  // namespace shardscope::perf
