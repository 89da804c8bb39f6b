// Hybrid layouts over sub-groups train exactly like one device: dp x tp, dp x pp, tp x pp and
// dp x tp x pp (world 8), the data-parallel dimension synchronised by hand-made DDP buckets,
// PyTorch's Reducer, or buckets with a ZeRO-1 sharded optimizer.
#include <gtest/gtest.h>

#include <set>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

struct HybridCase {
  int d, t, p;
  std::string sync = "ddp_bucketed";
  int accum = 1;
  bool sequence_parallel = false;
  std::string schedule = "1f1b";
  int c = 1;  // context-parallel degree (ring attention)
  bool unfused_attention = false, selective_recompute = false;
};

Config hybrid_config(const HybridCase& c) {
  Config config = test::tiny_config("hybrid", 1, c.accum);
  config.world = c.d * c.t * c.p * c.c;
  config.model.layers = 4;
  auto& so = config.strategy_options;
  so.tensor_parallel = c.t;
  so.pipeline_parallel = c.p;
  so.micro_batches = c.p > 1 ? 2 * c.p : 0;  // replicas compute on 2 t p sequences
  so.data_parallel_sync = c.sync;
  so.sequence_parallel = c.sequence_parallel;
  so.schedule = c.schedule;
  so.context_parallel = c.c > 1 ? c.c : 0;
  config.model.attention = c.unfused_attention ? "unfused" : "sdpa";
  config.model.selective_recompute = c.selective_recompute;
  finalize(config);
  return config;
}

std::string case_name(const HybridCase& c) {
  std::string name;
  auto add = [&](const char* dim, int degree) {
    if (degree > 1) name += (name.empty() ? "" : "x") + std::string(dim) + std::to_string(degree);
  };
  add("dp", c.d);
  add("cp", c.c);
  add("tp", c.t);
  add("pp", c.p);
  if (c.d * c.c > 1) name += "_" + c.sync;
  if (c.accum > 1) name += "_accum" + std::to_string(c.accum);
  if (c.sequence_parallel) name += "_sp";
  if (c.unfused_attention) name += "_unfused";
  if (c.selective_recompute) name += "_selective";
  if (c.schedule != "1f1b") {
    name += "_";
    for (char ch : c.schedule) name += ch == '-' ? '_' : ch;
  }
  return name;
}

class HybridMatchesReference : public testing::TestWithParam<HybridCase> {};

TEST_P(HybridMatchesReference, AfterFiveAdamWSteps) {
  test::expect_matches_reference(run_training(hybrid_config(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, HybridMatchesReference,
    testing::Values(HybridCase{2, 2, 1, "ddp_bucketed"}, HybridCase{2, 2, 1, "torch_ddp"},
                    HybridCase{2, 2, 1, "zero1"}, HybridCase{2, 1, 2, "ddp_bucketed"},
                    HybridCase{2, 1, 2, "torch_ddp"}, HybridCase{2, 1, 2, "zero1"},
                    HybridCase{1, 2, 2}, HybridCase{1, 2, 2, "ddp_bucketed", 1, true},
                    HybridCase{2, 2, 2, "ddp_bucketed"}, HybridCase{2, 2, 2, "torch_ddp"},
                    HybridCase{2, 2, 2, "zero1"}, HybridCase{2, 2, 2, "ddp_bucketed", 2, true},
                    HybridCase{4, 1, 1, "torch_ddp", 2}),
    [](const auto& info) { return case_name(info.param); });

// Unfused attention, and selective recompute, which runs each block's attention again in
// backward: tensor-parallel heads with sequence parallelism across pipeline stages.
HybridCase attention_case(int d, int t, int p, bool unfused, bool selective) {
  HybridCase c{d, t, p, "ddp_bucketed", 1, t > 1};
  c.unfused_attention = unfused;
  c.selective_recompute = selective;
  return c;
}
// Selective recompute around the ring (cp 2 x tp 2) under a zero-bubble schedule's split
// backward (pp 2): the ring's attention runs again inside the input pass.
HybridCase selective_case() {
  HybridCase c{1, 2, 2, "ddp_bucketed", 1, false, "zbv", 2};
  c.selective_recompute = true;
  return c;
}
INSTANTIATE_TEST_SUITE_P(Attention, HybridMatchesReference,
                         testing::Values(attention_case(1, 2, 2, true, true),
                                         attention_case(2, 2, 1, true, false),
                                         attention_case(2, 1, 2, false, true), selective_case()),
                         [](const auto& info) { return case_name(info.param); });

// Two stages per rank over two replicas (world 4 = p 2 x dp 2, a block per stage): a stage's
// gradients are finished by its last backward or weight pass, and only then synchronised.
INSTANTIATE_TEST_SUITE_P(
    StagesPerRank, HybridMatchesReference,
    testing::Values(HybridCase{2, 1, 2, "ddp_bucketed", 1, false, "interleaved-1f1b"},
                    HybridCase{2, 1, 2, "ddp_bucketed", 1, false, "zero-bubble"},
                    HybridCase{2, 1, 2, "ddp_bucketed", 2, false, "zbv"},
                    HybridCase{2, 1, 2, "zero1", 1, false, "zbv"},
                    HybridCase{2, 1, 2, "zero1", 2, false, "dualpipev"}),
    [](const auto& info) { return case_name(info.param); });

// The same schedules over tensor-parallel stages (tp 2 x pp 2, v 2): each virtual stage is a
// tensor-parallel stage, its I and W passes split per shard, with sequence parallelism and
// accumulation, and over a data-parallel dimension (world 8).
INSTANTIATE_TEST_SUITE_P(
    TensorParallelStagesPerRank, HybridMatchesReference,
    testing::Values(HybridCase{1, 2, 2, "ddp_bucketed", 1, false, "interleaved-1f1b"},
                    HybridCase{1, 2, 2, "ddp_bucketed", 2, true, "zero-bubble"},
                    HybridCase{1, 2, 2, "ddp_bucketed", 1, true, "zbv"},
                    HybridCase{1, 2, 2, "ddp_bucketed", 2, false, "dualpipev"},
                    HybridCase{2, 2, 2, "zero1", 1, false, "zbv"}),
    [](const auto& info) { return case_name(info.param); });

// Context parallelism inside the layout: each tensor-parallel stage attends with ring attention
// over its context group (the heads split over tp, the sequence's zig-zag chunks over cp), and
// gradients are averaged over the data and context ranks together.
INSTANTIATE_TEST_SUITE_P(ContextParallel, HybridMatchesReference,
                         testing::Values(HybridCase{1, 2, 1, "ddp_bucketed", 1, false, "1f1b", 2},
                                         HybridCase{1, 2, 1, "torch_ddp", 2, false, "1f1b", 2},
                                         HybridCase{2, 2, 1, "zero1", 1, false, "1f1b", 2},
                                         HybridCase{1, 1, 2, "ddp_bucketed", 2, false, "1f1b", 2},
                                         HybridCase{1, 2, 2, "ddp_bucketed", 1, false, "zbv", 2},
                                         HybridCase{1, 1, 1, "ddp_bucketed", 1, false, "1f1b", 4}),
                         [](const auto& info) { return case_name(info.param); });

TEST(Hybrid, SgdMomentumAndClippingOverEveryDimension) {
  Config c = hybrid_config({2, 2, 2, "zero1"});
  test::use_sgd_with_momentum(c);
  c.optimizer.clip_grad_norm = 0.5;
  test::expect_matches_reference(run_training(c));
}

TEST(Hybrid, EachDimensionTalksOverItsOwnSubGroup) {
  Config c = hybrid_config({2, 2, 2});
  c.reference = false;
  c.steps = 2;
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  // Rank 5 is replica 0's stage 1, tensor rank 1 (Megatron numbering, tp innermost).
  std::map<std::string, std::set<std::string>> groups_by_op;
  for (const auto& e : s.ranks[5].comm_events) {
    if (e.step == 1) groups_by_op[e.op].insert(e.group);
  }
  EXPECT_EQ(groups_by_op["all_reduce"].count("tp{4,5}"), 1u);  // tensor-parallel regions
  EXPECT_EQ(groups_by_op["all_reduce"].count("dp{5,7}"), 1u);  // gradient buckets
  EXPECT_EQ(groups_by_op["recv"], std::set<std::string>{"pp{1,5}"});
  EXPECT_EQ(groups_by_op["all_gather_into"].count("mp{0,1,4,5}"), 1u);  // the replica's batch
  for (const auto& e : s.ranks[5].comm_events) {
    if (e.op == "recv") {
      EXPECT_EQ(e.peer, 1) << "peers are recorded as world ranks";
    }
  }
}

// Between stages each tensor rank sends only its 1/t of the hidden state (which every tensor
// rank holds whole without sequence parallelism), and the receiving stage's tensor group
// gathers the pieces (Megatron's scatter-gather); with sequence parallelism each already holds
// its 1/t of the sequence. Either way a link carries 1/t of the whole, and training is exact
// (the equivalence suites run these layouts against one device).
TEST(Hybrid, StagesSendEachTensorRanksPieceAndTheNextGathersThem) {
  for (const bool sp : {false, true}) {
    Config c = hybrid_config({1, 2, 2});
    c.reference = false;
    c.steps = 2;
    c.strategy_options.sequence_parallel = sp;
    finalize(c);
    const RunSummary s = run_training(c);
    ASSERT_TRUE(s.ok) << s.failure;
    // A pipeline micro-batch: the tensor group's sequences over its micro-batches, in fp32.
    const int64_t sequences = int64_t(c.micro_batch) * c.world / c.strategy_options.micro_batches;
    const int64_t whole = sequences * c.model.seq * c.model.d_model * 4;
    int sends = 0, gathers = 0;
    for (const auto& e : s.ranks[0].comm_events) {
      if (e.step != 1 || e.op != "send") continue;
      ++sends;
      EXPECT_EQ(e.bytes, whole / 2) << (sp ? "with" : "without") << " sequence parallelism";
    }
    // Stage 1's tensor rank gathers each activation it receives: as many gathers as stage 0
    // sends.
    for (const auto& e : s.ranks[2].comm_events) {
      if (e.step == 1 && e.op == "all_gather_into" && e.group.rfind("tp", 0) == 0 &&
          e.bytes == whole / 2)
        ++gathers;
    }
    EXPECT_GT(sends, 0);
    // (With sequence parallelism the regions' own all_gathers have the same size: not counted.)
    if (!sp) {
      EXPECT_EQ(gathers, sends) << "one gather per received activation";
    }
  }
}

TEST(Hybrid, TensorParallelRanksHoldAShareOfTheShardedParametersAndAllOfTheRest) {
  Config c = hybrid_config({2, 4, 1});
  c.reference = false;
  c.steps = 1;
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  const ModelConfig& m = c.model;
  const int64_t d = m.d_model;
  // Replicated: both LayerNorms and both row-parallel biases of each block, the position
  // embedding and the final LayerNorm. Everything else is cut in 4.
  const int64_t replicated = m.layers * 6 * d + int64_t{m.seq} * d + 2 * d;
  const int64_t expected = ((s.parameters - replicated) / 4 + replicated) * 4;
  for (const auto& r : s.ranks) EXPECT_EQ(r.memory.parameters, expected) << "rank " << r.rank;
}

}  // namespace
}  // namespace shardscope
