// `ep` (expert parallelism) trains a mixture of experts exactly like one device: every rank
// holding all experts' share of a group (ep = world), groups holding copies (ep < world), with
// accumulation, top-1 / top-2 / top-4, AdamW and plain SGD (which shows a wrongly scaled expert
// gradient at once), and with activation checkpointing (a recomputed block dispatches again).
// Each rank holds E/ep experts; the all_to_all bytes in the trace are what the recorded routing
// says travelled.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <numeric>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "profiling/trace/memory_kind.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

struct EpCase {
  const char* name;
  int world;
  int ep;  // 0: the world
  int experts;
  int top_k;
  int accum = 2;
  bool sgd = false;
  bool checkpointing = false;
};

Config ep_config(const EpCase& k) {
  Config c = test::tiny_config("ddp_bucketed", k.world, k.accum);
  c.strategy = "ep";
  c.model.experts = k.experts;
  c.model.top_k = k.top_k;
  c.strategy_options.expert_parallel = k.ep;
  c.strategy_options.activation_checkpointing = k.checkpointing;
  if (k.sgd) test::use_sgd_with_momentum(c);
  finalize(c);
  return c;
}

class EpMatchesReference : public testing::TestWithParam<EpCase> {};

TEST_P(EpMatchesReference, TrainedWeightsAndLosses) {
  test::expect_matches_reference(run_training(ep_config(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(Cases, EpMatchesReference,
                         testing::Values(EpCase{"world2_e4_top2", 2, 0, 4, 2},
                                         EpCase{"world2_e4_top2_sgd", 2, 0, 4, 2, 2, true},
                                         EpCase{"world4_e8_top1", 4, 0, 8, 1, 1},
                                         EpCase{"world4_ep2_e4_top2", 4, 2, 4, 2},
                                         EpCase{"world4_ep2_e4_top2_sgd", 4, 2, 4, 2, 2, true},
                                         EpCase{"world2_e4_top4_checkpointing", 2, 0, 4, 4, 2,
                                                false, true}),
                         [](const auto& info) { return std::string(info.param.name); });

// Clipping takes the global norm: the replicated weights' gradients once, each expert's once
// (its group sums their squares), as one device's clip_grad_norm_ does; a wrong count changes
// every step's scale.
TEST(Ep, ClipsByTheGlobalGradientNorm) {
  Config c = ep_config({"", 4, 2, 4, 2});
  c.optimizer.clip_grad_norm = 0.05;
  test::expect_matches_reference(run_training(c));
  test::use_sgd_with_momentum(c);
  test::expect_matches_reference(run_training(c));
}

// Expert-parallel rank r of a group holds experts [r E/e, (r+1) E/e): its parameters are the
// replicated ones and E/e experts per layer, a fraction of what a data-parallel rank holds.
TEST(Ep, EachRankHoldsItsShareOfTheExperts) {
  Config c = ep_config({"", 4, 0, 8, 2, 1});
  c.reference = false;
  c.steps = 1;
  const RunSummary ep = run_training(c);
  ASSERT_TRUE(ep.ok) << ep.failure;
  Config d = c;
  d.strategy = "ddp_bucketed";
  d.strategy_options.expert_parallel = 0;
  const RunSummary ddp = run_training(d);
  ASSERT_TRUE(ddp.ok) << ddp.failure;
  const int64_t whole = ddp.ranks[0].memory.parameters;
  // One expert: fc (64 x 256 + 256) and proj (256 x 64 + 64), fp32, in each of 2 layers.
  const int64_t expert = 4 * (64 * 256 + 256 + 256 * 64 + 64);
  for (const auto& rank : ep.ranks) {
    EXPECT_EQ(rank.memory.parameters, whole - 2 * (8 - 2) * expert) << "rank " << rank.rank;
    EXPECT_EQ(rank.memory.gradients, rank.memory.parameters) << "rank " << rank.rank;
  }
  // The memory formula counts the same share (E/ep experts a GPU).
  ASSERT_TRUE(ep.trace.run.result.has_value());
  for (const auto& rank : ep.trace.run.result->ranks) {
    ASSERT_TRUE(rank.formula_bytes.has_value()) << "rank " << rank.rank;
    EXPECT_EQ((*rank.formula_bytes)[static_cast<int>(profiling::MemoryKind::kParameters)],
              ep.ranks[rank.rank].memory.parameters)
        << "rank " << rank.rank;
  }
  // The gathered weights are the whole model, the same on every rank.
  EXPECT_TRUE(ep.ranks_agree) << ep.max_rank_delta;
  EXPECT_EQ(ep.weights.size(), ddp.weights.size());
}

// Every rank's tokens per expert are recorded each step, and the trace's all_to_all bytes are
// what that routing sends: per layer and micro-batch, the expert counts (E int64), the dispatched
// tokens (N k rows of d), the outputs of the rows this rank's experts received, and in backward
// both again. The dispatch's bytes to other ranks are measured against the uniform-routing
// formula N k d bytes (e - 1) / e.
TEST(Ep, AllToAllBytesAreWhatTheRecordedRoutingSends) {
  const int world = 4, experts = 8, top_k = 2, layers = 2, d = 64;
  Config c = ep_config({"", world, 0, experts, top_k, 1});
  c.reference = false;
  c.steps = 2;
  const RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  ASSERT_TRUE(s.trace.run.result.has_value());
  const auto& routed = s.trace.run.result->routed_tokens;  // [rank][step][layer * E + expert]
  ASSERT_EQ(routed.size(), size_t(world));
  const int64_t tokens = int64_t(c.micro_batch) * c.model.seq;  // N, per rank and micro-batch
  const int per_rank = experts / world;
  double off_rank = 0, formula = 0, combine_off_rank = 0;
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(routed[r].size(), 2u);
    for (const auto& step : routed[r]) {
      ASSERT_EQ(step.size(), size_t(layers * experts));
      for (int l = 0; l < layers; ++l) {
        int64_t sum = 0;
        for (int e = 0; e < experts; ++e) sum += step[l * experts + e];
        EXPECT_EQ(sum, tokens * top_k) << "rank " << r << " layer " << l;
      }
    }
    int64_t bytes = 0;
    for (const auto& e : s.ranks[r].comm_events)
      if (e.step == 1 && e.op == "all_to_all") bytes += e.bytes;
    int64_t received = 0;  // rows this rank's experts got in step 1, over layers
    for (int sender = 0; sender < world; ++sender)
      for (int l = 0; l < layers; ++l)
        for (int x = r * per_rank; x < (r + 1) * per_rank; ++x)
          received += routed[sender][1][l * experts + x];
    const int64_t expected =
        layers * (experts * 8 + 2 * tokens * top_k * d * 4) + 2 * received * d * 4;
    EXPECT_EQ(bytes, expected) << "rank " << r;
    for (int l = 0; l < layers; ++l) {
      for (int x = 0; x < experts; ++x)
        if (x / per_rank != r) off_rank += double(routed[r][1][l * experts + x]) * d * 4;
      for (int sender = 0; sender < world; ++sender) {
        if (sender == r) continue;  // outputs this rank's experts send back to other ranks
        for (int x = r * per_rank; x < (r + 1) * per_rank; ++x)
          combine_off_rank += double(routed[sender][1][l * experts + x]) * d * 4;
      }
      formula += double(tokens) * top_k * d * 4 * (world - 1) / world;
    }
  }
  std::printf(
      "[ measured ] forward bytes to other ranks in one step, all ranks: dispatch %.0f, "
      "combine %.0f; formula N k d bytes (e-1)/e: %.0f each way (ratios %.3f, %.3f)\n",
      off_rank, combine_off_rank, formula, off_rank / formula, combine_off_rank / formula);
  // Every row that leaves a rank in the dispatch comes back in the combine.
  EXPECT_EQ(off_rank, combine_off_rank);
  EXPECT_GT(off_rank, 0.5 * formula);
  EXPECT_LT(off_rank, 1.5 * formula);
}

// Under bf16 autocast the tokens travel in bf16, as the experts' first matmul would read them:
// half the bytes of fp32 (and the same values).
TEST(Ep, TokensTravelInTheComputeDtype) {
  std::map<std::string, int64_t> dispatched;
  for (const char* precision : {"fp32", "bf16"}) {
    Config c = ep_config({"", 2, 0, 4, 2, 1});
    c.strategy_options.precision = precision;
    c.reference = false;
    c.steps = 1;
    const RunSummary s = run_training(c);
    ASSERT_TRUE(s.ok) << s.failure;
    for (const auto& e : s.ranks[0].comm_events) {
      if (e.op == "all_to_all" && e.bytes > 4 * 8) {  // past the expert counts
        dispatched[precision] = e.bytes;
        break;
      }
    }
  }
  // N k d: 2 sequences of 32 tokens, top-2, width 64.
  EXPECT_EQ(dispatched["fp32"], 2 * 32 * 2 * 64 * 4);
  EXPECT_EQ(dispatched["bf16"] * 2, dispatched["fp32"]);
}

TEST(Ep, RefusesWhatItCannotRun) {
  auto refused = [](Config c, const std::string& field) {
    try {
      finalize(c);
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted; expected a complaint about " << field;
  };
  Config dense = test::tiny_config("ddp_bucketed", 2, 1);
  dense.strategy = "ep";
  refused(dense, "model.experts");
  Config c = ep_config({"", 4, 0, 4, 2});
  c.strategy_options.expert_parallel = 3;
  refused(c, "strategy_options.expert_parallel");
  c.strategy_options.expert_parallel = 0;
  c.model.experts = 6;  // 4 ranks cannot hold 6 experts evenly
  refused(c, "strategy_options.expert_parallel");
  Config other = test::tiny_config("ddp_bucketed", 2, 1);
  other.strategy_options.expert_parallel = 2;
  refused(other, "strategy_options.expert_parallel");
}

}  // namespace
}  // namespace shardscope
