// What the projection says the host dispatches for our GPT (profiling::HostOps) against what a
// real step of it dispatches, counted by perf's census: operators of the forward, views and
// matmuls among them, autograd nodes of the backward, operators of the optimizer.
#include "app/perf/op_census.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/perf/perf_suite.h"
#include "engine/train/config_bounds.h"
#include "profiling/projection/hardware_profile.h"
#include "profiling/projection/memory_projection.h"
#include "profiling/projection/moe_costs.h"
#include "profiling/projection/transformer_costs.h"

namespace shardscope::perf {
namespace {

Config tiny(int layers, bool autocast, bool tied = false, const char* attention = "sdpa") {
  Config config = config_from_json(nlohmann::json{
      {"strategy", "single"},
      {"preset", "tiny"},
      {"model", {{"layers", layers}, {"tie_embeddings", tied}, {"attention", attention}}},
      {"strategy_options", {{"precision", autocast ? "bf16" : "fp32"}}}});
  finalize(config);
  return config;
}

OpCensus census(int layers, bool autocast, bool tied = false, const char* attention = "sdpa") {
  return census_of_step(tiny(layers, autocast, tied, attention));
}

// FLOPs of the projection's matmuls in `ops`.
double matmul_flops(const std::vector<profiling::PricedOp>& ops) {
  double flops = 0;
  for (const auto& op : ops)
    if (op.kind == profiling::PricedOp::Kind::kMatmul) flops += op.flops;
  return flops;
}

int64_t forward_total(const profiling::HostOps& h) {
  return int64_t(h.views + h.ops + h.matmuls);
}

int64_t named(const std::map<std::string, int64_t>& names, const std::string& name) {
  const auto it = names.find(name);
  return it == names.end() ? 0 : it->second;
}

// A block's forward operators, views, matmuls and backward nodes in a real step (two blocks less
// one) against the projection's counts.
void expect_block_census(const OpCensus& one, const OpCensus& two,
                         const profiling::HostOps& block) {
  EXPECT_EQ(two.forward_ops - one.forward_ops, forward_total(block));
  EXPECT_EQ(two.forward_views - one.forward_views, int64_t(block.views));
  EXPECT_EQ(named(two.forward_names, "aten::matmul") - named(one.forward_names, "aten::matmul"),
            int64_t(block.matmuls));
  EXPECT_EQ(two.backward_nodes - one.backward_nodes, int64_t(block.nodes));
}

TEST(ProjectionCheck, HostOperatorsAreWhatAStepDispatches) {
  for (const bool autocast : {false, true}) {
    SCOPED_TRACE(autocast ? "bf16 autocast" : "fp32");
    const OpCensus one = census(1, autocast), two = census(2, autocast);
    // A block: two blocks less one.
    const profiling::HostOps block = profiling::block_host_ops(autocast);
    expect_block_census(one, two, block);
    EXPECT_EQ(named(two.backward_names, "MmBackward0") - named(one.backward_names, "MmBackward0"),
              int64_t(block.node_matmuls / 2));
    // Autocast's casts run inside the matmuls, a ToCopy node each.
    const auto per_block = [&](const std::string& node) {
      return named(two.backward_names, node) - named(one.backward_names, node);
    };
    EXPECT_EQ(per_block("ToCopyBackward0"), int64_t(block.casts));
    // The weights' side: each weight and bias accumulated, each weight's transpose, the biases'
    // sums and (autocast) the weights' casts.
    EXPECT_EQ(per_block("torch::autograd::AccumulateGrad") + per_block("TBackward0") + 4 +
                  (autocast ? 4 : 0),
              int64_t(block.weight_nodes));
    // The embedding and the head: one block's step less the block.
    const profiling::HostOps embedding = profiling::embedding_host_ops(autocast);
    const profiling::HostOps head = profiling::head_host_ops(autocast, false);
    EXPECT_EQ(one.forward_ops - forward_total(block),
              forward_total(embedding) + forward_total(head));
    EXPECT_EQ(one.forward_views - int64_t(block.views), int64_t(embedding.views + head.views));
    EXPECT_EQ(one.backward_nodes - int64_t(block.nodes), int64_t(embedding.nodes + head.nodes));
    // AdamW: kAdamWKernelsPerTensor operators a parameter tensor.
    profiling::ModelShape shape;
    shape.layers = 1;
    EXPECT_EQ(one.optimizer_ops,
              profiling::kAdamWKernelsPerTensor * profiling::parameter_tensors(shape));
    EXPECT_EQ(two.optimizer_ops - one.optimizer_ops, profiling::kAdamWKernelsPerTensor * 12);
  }
}

// Unfused attention dispatches what the projection says it does, block for block.
TEST(ProjectionCheck, UnfusedAttentionOperatorsAreWhatAStepDispatches) {
  for (const bool autocast : {false, true}) {
    SCOPED_TRACE(autocast ? "bf16 autocast" : "fp32");
    const OpCensus one = census(1, autocast, false, "unfused"),
                   two = census(2, autocast, false, "unfused");
    const profiling::HostOps block = profiling::block_host_ops(autocast, true);
    expect_block_census(one, two, block);
    EXPECT_EQ(named(two.backward_names, "BmmBackward0") - named(one.backward_names, "BmmBackward0"),
              int64_t(block.node_matmuls - profiling::block_host_ops(autocast).node_matmuls) / 2);
    // The attention's own operators (what selective recompute dispatches again).
    int64_t attention_ops = 0;
    for (const char* op : {"aten::mul", "aten::ones", "aten::triu", "aten::masked_fill_",
                           "aten::softmax", "aten::contiguous"})
      attention_ops += named(two.forward_names, op) - named(one.forward_names, op);
    EXPECT_EQ(attention_ops, int64_t(profiling::attention_host_ops(true).ops));
  }
}

// The matmuls the projection prices are the ones a step runs, FLOP for FLOP (from the shapes of
// each top-level matmul's inputs): a block's four Linears and the LM head.
TEST(ProjectionCheck, MatmulFlopsAreWhatAStepRuns) {
  const Config config = tiny(2, true);
  const OpCensus one = census(1, true), two = census(2, true);
  profiling::PassShape shape;
  shape.model = model_shape(config.model);
  shape.sequences = config.micro_batch;
  const auto hw = profiling::load_hardware_profile("8xH100");
  const double block = matmul_flops(profiling::block_ops(shape, hw, hw).forward);
  const double head = matmul_flops(profiling::head_ops(shape, hw, hw).forward) +
                      matmul_flops(profiling::embedding_ops(shape, hw, hw).forward);
  ASSERT_GT(block, 0);
  EXPECT_DOUBLE_EQ(two.forward_matmul_flops - one.forward_matmul_flops, block);
  EXPECT_DOUBLE_EQ(one.forward_matmul_flops - block, head);
}

// A mixture of experts in each block's MLP's place (its experts where the tokens are, as the
// data-parallel strategies run them): a block dispatches the dense block's attention side and the
// layer's own operators (profiling/projection/moe_costs), in fp32 and bf16, E 4 k 2 and E 2 k 1.
TEST(ProjectionCheck, MoeOperatorsAreWhatAStepDispatches) {
  for (const bool autocast : {false, true}) {
    for (const auto& [experts, top_k] : {std::pair<int, int>{4, 2}, {2, 1}}) {
      SCOPED_TRACE(std::string(autocast ? "bf16" : "fp32") + ", E " + std::to_string(experts) +
                   ", k " + std::to_string(top_k));
      const auto with_experts = [&](int layers) {
        Config config = tiny(layers, autocast);
        config.model.experts = experts;
        config.model.top_k = top_k;
        finalize(config);
        return census_of_step(config);
      };
      const OpCensus one = with_experts(1), two = with_experts(2);
      profiling::HostOps block = profiling::block_host_ops(autocast);
      block -= profiling::dense_mlp_host_ops(autocast);
      block += profiling::moe_host_ops({experts, top_k, 0}, autocast);
      expect_block_census(one, two, block);
    }
  }
}

TEST(ProjectionCheck, ATiedHeadAccumulatesOneGradientLess) {
  const OpCensus untied = census(1, true, false), tied = census(1, true, true);
  const double fewer =
      profiling::head_host_ops(true, false).nodes - profiling::head_host_ops(true, true).nodes;
  EXPECT_EQ(untied.backward_nodes - tied.backward_nodes, int64_t(fewer));
  EXPECT_EQ(named(untied.backward_names, "torch::autograd::AccumulateGrad") -
                named(tied.backward_names, "torch::autograd::AccumulateGrad"),
            1);
}

TEST(PerfSuite, HostOpsTimesEachKindAndCountsOurStep) {
  PerfOptions options;
  options.quick = true;
  options.sections = {"host-ops"};
  const auto rows = run_suite(options);
  ASSERT_EQ(rows.size(), 10u);
  for (const auto& row : rows) EXPECT_GT(row.ours, 0) << row.what;
  EXPECT_EQ(rows[7].ours, forward_total(profiling::block_host_ops(false))) << rows[7].what;
}

}  // namespace
}  // namespace shardscope::perf
