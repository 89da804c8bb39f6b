// What the projection prices for a mixture of experts (profiling/projection/moe_costs) is what
// our MoE layer dispatches: its routing, and its experts either run where the tokens are (the
// data-parallel strategies) or reached through expert parallelism's all_to_all (`ep`, any
// degree). Operators, views and matmuls of the forward and the autograd nodes of the backward,
// counted with a RecordFunction observer on rank threads.
#include "profiling/projection/moe_costs.h"

#include <gtest/gtest.h>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "engine/model/gpt_model.h"
#include "engine/model/mixed_precision.h"
#include "engine/train/config.h"
#include "profiling/projection/transformer_costs.h"
#include "strategies/expert/expert_dispatch.h"
#include "tests/support/rank_threads.h"

namespace shardscope {
namespace {

// Top-level operators of one thread's forward of the layer, and the autograd nodes of its
// backward.
struct Census {
  std::atomic<std::thread::id> thread{};
  std::atomic<bool> backward{false};
  std::mutex mutex;
  std::map<std::string, int> forward, nodes;
};
std::atomic<Census*> census{nullptr};
thread_local int depth = 0;

std::unique_ptr<at::ObserverContext> begins(const at::RecordFunction& fn) {
  const int d = depth++;
  Census* c = census.load();
  if (c == nullptr || std::this_thread::get_id() != c->thread.load()) return nullptr;
  const bool node = fn.scope() == at::RecordScope::BACKWARD_FUNCTION;
  if (c->backward ? !node : (node || d != 0)) return nullptr;
  std::lock_guard<std::mutex> lock(c->mutex);
  ++(node ? c->nodes : c->forward)[fn.name()];
  return nullptr;
}
void ends(const at::RecordFunction&, at::ObserverContext*) {
  --depth;
}

bool is_view(const std::string& name) {
  static const std::set<std::string> kViews = {
      "aten::narrow", "aten::select", "aten::transpose", "aten::unsqueeze", "aten::view",
      "aten::slice",  "aten::t",      "aten::reshape",   "aten::split",     "aten::flatten"};
  return kViews.count(name) > 0;
}

// One MoE layer's forward and backward on rank 0 of `ranks` threads, `ep` > 0 through
// expert parallelism's dispatch over all of them, 0 with the experts where the tokens are.
Census& count_moe(Census& seen, int ranks, bool dispatch, int experts, int top_k, bool autocast) {
  const int64_t d = 16, tokens = 24;
  const auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(begins, ends)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  test::run_on_ranks(ranks, [&](RankContext& ctx) {
    torch::manual_seed(7);  // every rank the same router and experts
    Moe moe(int(d), int(4 * d), experts, top_k);
    torch::manual_seed(100 + ctx.rank);
    auto x = torch::randn({2, tokens / 2, d}, torch::requires_grad());
    ep::Placement placement{ranks > 1 ? ctx.comm : nullptr, ctx.rank, ranks, experts};
    if (dispatch) {
      std::vector<Mlp> local;
      for (int l = 0; l < placement.per_rank(); ++l)
        local.emplace_back(moe->experts->ptr<MlpImpl>(ctx.rank * placement.per_rank() + l));
      moe->experts_fn = [&placement, local](const torch::Tensor& t, const torch::Tensor& chosen,
                                            const torch::Tensor& weights) {
        return ep::dispatch_to_experts(t, chosen, weights, local, placement);
      };
    }
    StrategyOptions options;
    options.precision = autocast ? "bf16" : "fp32";
    torch::Tensor out;
    if (ctx.rank == 0) seen.thread = std::this_thread::get_id(), census = &seen;
    {
      ComputePrecisionScope precision(options, torch::kCPU);
      out = moe->forward(x);
    }
    if (ctx.rank == 0) census = nullptr;
    // The gradient flows in as a block's would; x, a leaf here, is the LayerNorm's output there.
    auto grad = torch::ones_like(out);
    if (ctx.rank == 0) seen.backward = true, census = &seen;
    out.backward(grad);
    if (ctx.rank == 0) census = nullptr;
    if (ctx.rank == 0) --seen.nodes["torch::autograd::AccumulateGrad"];  // x's
  });
  at::removeCallback(handle);
  return seen;
}

int count(const std::map<std::string, int>& names, bool views) {
  int n = 0;
  for (const auto& [name, c] : names)
    if (name != "aten::matmul" && is_view(name) == views) n += c;
  return n;
}

TEST(MoeCosts, HostOperatorsAreWhatTheLayerDispatches) {
  struct Case {
    int ranks;
    bool dispatch;
    int experts, top_k;
  };
  for (const Case& c : {Case{1, false, 4, 2}, Case{1, false, 2, 1}, Case{1, true, 4, 2},
                        Case{2, true, 4, 2}, Case{2, true, 2, 1}}) {
    for (const bool autocast : {false, true}) {
      Census seen;
      count_moe(seen, c.ranks, c.dispatch, c.experts, c.top_k, autocast);
      const profiling::MoeShape shape{c.experts, c.top_k, c.dispatch ? c.ranks : 0};
      const profiling::HostOps h = profiling::moe_host_ops(shape, autocast);
      const std::string what = std::string(c.dispatch ? "dispatch" : "local") + ", ep " +
                               std::to_string(c.ranks) + ", E " + std::to_string(c.experts) +
                               ", k " + std::to_string(c.top_k) + (autocast ? ", bf16" : ", fp32");
      EXPECT_EQ(count(seen.forward, true), int(h.views)) << what;
      EXPECT_EQ(count(seen.forward, false), int(h.ops)) << what;
      EXPECT_EQ(seen.forward["aten::matmul"], int(h.matmuls)) << what;
      int nodes = 0;
      for (const auto& [name, n] : seen.nodes) nodes += n;
      // In a block two more view nodes come with the layer's input and output (the whole
      // model's census, ProjectionCheck.MoeOperatorsAreWhatAStepDispatches, holds that).
      EXPECT_EQ(nodes + 2, int(h.nodes)) << what;
      EXPECT_EQ(seen.nodes["torch::autograd::AccumulateGrad"] + seen.nodes["TBackward0"] +
                    (autocast ? 1 + 4 * int(shape.local_experts()) : 0),
                int(h.weight_nodes))
          << what;
    }
  }
}
}  // namespace
}  // namespace shardscope
