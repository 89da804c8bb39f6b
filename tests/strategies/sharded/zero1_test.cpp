// ZeRO-1 composed with every gradient sync trains exactly like one device, keeps only its
// partition's optimizer state, and balances the partition by size.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

using test::expect_matches_reference;

struct Zero1Case {
  std::string strategy;
  int world;
  int accum;
};

void PrintTo(const Zero1Case& c, std::ostream* os) {
  *os << c.strategy << ", world " << c.world << ", accum " << c.accum;
}

class Zero1MatchesReference : public testing::TestWithParam<Zero1Case> {};

TEST_P(Zero1MatchesReference, WithAdamW) {
  expect_matches_reference(
      run_training(test::tiny_config(GetParam().strategy, GetParam().world, GetParam().accum)));
}

TEST_P(Zero1MatchesReference, WithSgdMomentumWhoseStateIsSharded) {
  Config c = test::tiny_config(GetParam().strategy, GetParam().world, GetParam().accum);
  test::use_sgd_with_momentum(c);
  expect_matches_reference(run_training(c));
}

std::vector<Zero1Case> cases() {
  std::vector<Zero1Case> out;
  for (const char* s : {"zero1", "torch_ddp+zero1", "ddp_flat+zero1", "ddp_bucketed+zero1"}) {
    for (int world : {2, 4}) {
      for (int accum : {1, 2}) out.push_back({s, world, accum});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Compositions, Zero1MatchesReference, testing::ValuesIn(cases()),
                         [](const auto& info) {
                           std::string name = info.param.strategy;
                           std::replace(name.begin(), name.end(), '+', '_');
                           return name + "_world" + std::to_string(info.param.world) + "_accum" +
                                  std::to_string(info.param.accum);
                         });

TEST(Zero1, ToyModelsFrozenTiedUnused) {
  Config frozen = test::tiny_config("ddp_flat+zero1", 2, 2);
  frozen.model.frozen = {"pos_emb.weight"};
  expect_matches_reference(run_training(frozen));
  Config tied = test::tiny_config("zero1", 4, 1);
  tied.model.tie_embeddings = true;
  expect_matches_reference(run_training(tied));
  Config unused = test::tiny_config("torch_ddp+zero1", 2, 2);
  unused.model.unused_parameter = true;
  unused.strategy_options.find_unused_parameters = true;
  expect_matches_reference(run_training(unused));
}

TEST(Zero1, OptimizerStateIsDdpsSplitByBalancedPartition) {
  const int world = 4;
  RunSummary ddp = run_training(test::tiny_config("ddp_bucketed", world, 1));
  RunSummary zero = run_training(test::tiny_config("zero1", world, 1));
  ASSERT_TRUE(ddp.ok && zero.ok);
  const int64_t full = ddp.ranks[0].memory.optimizer_state;
  ASSERT_GT(full, 0);
  int64_t total = 0, largest = 0;
  for (const auto& r : zero.ranks) {
    total += r.memory.optimizer_state;
    largest = std::max(largest, r.memory.optimizer_state);
    EXPECT_EQ(r.memory.parameters, ddp.ranks[0].memory.parameters);  // stage 1 keeps parameters
  }
  EXPECT_EQ(total, full);  // every byte of state lives on exactly one rank
  // Balanced within one partition's rounding: the largest tensor's state (AdamW: 2 x 4 bytes per
  // element; tiny's largest is 256 x 64).
  const int64_t largest_tensor_state = 256 * 64 * 4 * 2;
  EXPECT_LE(largest, full / world + largest_tensor_state);
}

}  // namespace
}  // namespace shardscope
