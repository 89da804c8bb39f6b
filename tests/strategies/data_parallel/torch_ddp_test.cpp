// torch_ddp must train exactly like one device on the same global batches: the full weights of
// every rank are compared with the single-device reference after 5 AdamW steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "strategies/data_parallel/reducer_sync.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

using test::expect_matches_reference;

Config ddp_config(int world, int accum) {
  return test::tiny_config("torch_ddp", world, accum);
}

struct DdpCase {
  int world;
  int accum;
};

void PrintTo(const DdpCase& c, std::ostream* os) {
  *os << "world " << c.world << ", accum " << c.accum;
}

class TorchDdpMatchesReference : public testing::TestWithParam<DdpCase> {};

TEST_P(TorchDdpMatchesReference, AfterFiveAdamWSteps) {
  expect_matches_reference(run_training(ddp_config(GetParam().world, GetParam().accum)));
}

INSTANTIATE_TEST_SUITE_P(Layouts, TorchDdpMatchesReference,
                         testing::Values(DdpCase{2, 1}, DdpCase{4, 1}, DdpCase{2, 2},
                                         DdpCase{4, 2}),
                         [](const auto& info) {
                           return "world" + std::to_string(info.param.world) + "_accum" +
                                  std::to_string(info.param.accum);
                         });

TEST(TorchDdp, FrozenParameterStaysAtItsInitialValue) {
  Config c = ddp_config(2, 2);
  c.model.frozen = {"blocks.0.attn.qkv.bias", "pos_emb.weight"};
  RunSummary s = run_training(c);
  expect_matches_reference(s);
  GptModel initial(c.model, c.seed);
  auto initial_params = initial->named_parameters();
  int checked = 0;
  for (const auto& [name, w] : s.weights) {
    const bool frozen = name == "pos_emb.weight";
    if (frozen || name == "tok_emb.weight") {
      EXPECT_EQ(torch::equal(w, initial_params[name]), frozen) << name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);
}

TEST(TorchDdp, TiedEmbeddingGetsBothGradients) {
  Config c = ddp_config(4, 1);
  c.model.tie_embeddings = true;
  expect_matches_reference(run_training(c));
}

TEST(TorchDdp, UnusedParameterWithFindUnusedParameters) {
  Config c = ddp_config(2, 2);
  c.model.unused_parameter = true;
  c.strategy_options.find_unused_parameters = true;
  expect_matches_reference(run_training(c));
}

TEST(TorchDdp, SmallBucketsAndSgdWithClippingAndSchedule) {
  Config c = ddp_config(3, 1);
  c.strategy_options.bucket_mb = 0.05;  // many buckets
  c.optimizer.name = "sgd";
  c.optimizer.momentum = 0.9;
  c.optimizer.lr = 0.05;
  c.optimizer.clip_grad_norm = 0.5;
  c.optimizer.schedule = "cosine";
  c.optimizer.warmup_steps = 2;
  expect_matches_reference(run_training(c));
}

// AdamW barely notices a gradient off by a constant factor (only through eps), so a missing
// division by the world size or by the accumulation steps could hide from the tests above. Plain
// SGD without clipping moves by exactly lr x gradient: any scale error shows.
TEST(TorchDdp, PlainSgdCatchesGradientScaleErrors) {
  for (int world : {2, 4}) {
    Config c = ddp_config(world, 2);
    c.optimizer.name = "sgd";
    c.optimizer.lr = 0.5;
    c.optimizer.weight_decay = 0.0;
    expect_matches_reference(run_training(c));
  }
}

TEST(TorchDdp, ReducesOncePerStepNotPerMicroBatch) {
  Config plain = ddp_config(2, 1), accumulating = ddp_config(2, 4);
  plain.strategy_options.bucket_mb = 0.05;  // several buckets
  accumulating.strategy_options.bucket_mb = 0.05;
  RunSummary a = run_training(plain), b = run_training(accumulating);
  ASSERT_TRUE(a.ok && b.ok);
  for (int r = 0; r < 2; ++r) {
    auto per_step = test::traffic_per_step(a.ranks[r]);
    ASSERT_EQ(per_step.size(), size_t(plain.steps));
    EXPECT_EQ(per_step[0].all_reduces, 1) << "DDP starts with one bucket until it learns the order";
    EXPECT_GT(per_step[1].all_reduces, 1) << "then rebuilds buckets of bucket_mb";
    // Four accumulation micro-batches still reduce each bucket once per step.
    EXPECT_EQ(test::traffic_per_step(b.ranks[r]), per_step);
  }
}

// The rebuild is DDP's own host work before the second step's forward (with accumulation, before
// that step's first micro-batch only): the timeline names it there, once a rank, and nowhere else
// (before any backward, DDP's call does nothing and shows nothing).
TEST(TorchDdp, TheBucketRebuildIsNamedOnceBeforeTheSecondStepsForward) {
  Config c = ddp_config(2, 2);
  c.reference = false;
  c.steps = 3;
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  ASSERT_EQ(s.trace.ranks.size(), 2u);
  for (const auto& rank : s.trace.ranks) {
    std::vector<const profiling::Event*> rebuilds;
    int64_t first_forward_of_step_1 = std::numeric_limits<int64_t>::max();
    for (const auto& e : rank.events) {
      if (s.trace.str(e.name) == kRebuildBucketsSpan) rebuilds.push_back(&e);
      if (e.category == profiling::Category::kForward && e.step == 1)
        first_forward_of_step_1 = std::min(first_forward_of_step_1, e.t0_ns);
    }
    ASSERT_EQ(rebuilds.size(), 1u) << "rank " << rank.rank;
    EXPECT_EQ(rebuilds[0]->step, 1) << "rank " << rank.rank;
    EXPECT_EQ(rebuilds[0]->category, profiling::Category::kOther);
    EXPECT_LE(rebuilds[0]->t1_ns, first_forward_of_step_1) << "rank " << rank.rank;
  }
}

TEST(Run, ARankThatThrowsEndsTheRunWithAClearError) {
  Config c = ddp_config(4, 1);
  c.fault = parse_fault("rank=2,step=3");
  c.collective_timeout_s = 600;  // beyond ctest's limit: the run must end by teardown, not timeout
  RunSummary s = run_training(c);
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.failed_rank, 2);
  EXPECT_NE(s.failure.find("rank 2 failed: injected fault"), std::string::npos) << s.failure;
}

TEST(Run, SingleIsItsOwnReference) {
  Config c = config_from_json(nlohmann::json{{"preset", "tiny"}, {"steps", 3}, {"grad_accum", 2}});
  finalize(c);
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok);
  // Two accumulated micro-batches vs one batch of both: equal up to summation order.
  EXPECT_LE(s.reference->deviation.rel, test::kReferenceTolerance);
}

}  // namespace
}  // namespace shardscope
