// Same seed, same config, same machine: the same loss curve and bitwise the same weights, run
// after run (thread mode, CPU). Reductions over ranks and threads happen in a fixed order, so any
// difference here is a bug (a race, an unordered container, an uninitialised buffer).
#include <gtest/gtest.h>

#include "engine/state/weights.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

struct Case {
  const char* strategy;
  int world;
};

class Determinism : public testing::TestWithParam<Case> {};

TEST_P(Determinism, TwoRunsGiveTheSameLossesAndBitwiseTheSameWeights) {
  Config config = test::tiny_config(GetParam().strategy, GetParam().world, 1);
  config.reference = false;
  const RunSummary a = run_training(config);
  const RunSummary b = run_training(config);
  ASSERT_TRUE(a.ok) << a.failure;
  ASSERT_TRUE(b.ok) << b.failure;
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) EXPECT_EQ(a.steps[i].loss, b.steps[i].loss) << i;
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    EXPECT_EQ(a.ranks[r].checksum, b.ranks[r].checksum) << "rank " << r;
  }
  EXPECT_EQ(weights_checksum(a.weights), weights_checksum(b.weights));
}

INSTANTIATE_TEST_SUITE_P(Strategies, Determinism,
                         testing::Values(Case{"ddp_bucketed", 4}, Case{"torch_ddp", 2},
                                         Case{"zero2", 4}, Case{"fsdp", 2}, Case{"tp", 2},
                                         Case{"pp", 2}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.strategy) + "_world" +
                                  std::to_string(info.param.world);
                         });

}  // namespace
}  // namespace shardscope
