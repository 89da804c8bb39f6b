// `tp` trains exactly like one device: shards cut from the reference's initialisation, the
// group computing on the global batch, gathered weights compared with the reference.
#include <gtest/gtest.h>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

struct TpCase {
  int t;
  int accum;
  bool sequence_parallel = false;
};

Config case_config(const TpCase& c) {
  Config config = test::tiny_config("tp", c.t, c.accum);
  config.strategy_options.sequence_parallel = c.sequence_parallel;
  return config;
}

class TpMatchesReference : public testing::TestWithParam<TpCase> {};

TEST_P(TpMatchesReference, AfterFiveAdamWSteps) {
  RunSummary s = run_training(case_config(GetParam()));
  test::expect_matches_reference(s);
  EXPECT_FALSE(s.replicated);
}

TEST_P(TpMatchesReference, WithSgdMomentumAndClipping) {
  Config c = case_config(GetParam());
  test::use_sgd_with_momentum(c);
  c.optimizer.clip_grad_norm = 0.5;  // sharded and replicated parts of the norm
  test::expect_matches_reference(run_training(c));
}

INSTANTIATE_TEST_SUITE_P(Degrees, TpMatchesReference,
                         testing::Values(TpCase{2, 1}, TpCase{2, 2}, TpCase{4, 1}, TpCase{4, 2},
                                         TpCase{2, 1, true}, TpCase{2, 2, true}, TpCase{4, 1, true},
                                         TpCase{4, 2, true}),
                         [](const auto& info) {
                           return "t" + std::to_string(info.param.t) + "_accum" +
                                  std::to_string(info.param.accum) +
                                  (info.param.sequence_parallel ? "_sp" : "");
                         });

TEST(Tp, SequenceParallelTurnsAllReducesIntoGatherScatterPairs) {
  for (bool sp : {false, true}) {
    Config c = case_config({2, 1, sp});
    c.reference = false;
    c.steps = 2;
    RunSummary s = run_training(c);
    ASSERT_TRUE(s.ok) << s.failure;
    int64_t all_reduce = 0, reduce_scatter = 0;
    for (const auto& e : s.ranks[0].comm_events) {
      if (e.step != 1) continue;
      if (e.op == "all_reduce") all_reduce += e.bytes;
      if (e.op == "reduce_scatter_tensor") reduce_scatter += e.bytes;
    }
    if (sp) {
      EXPECT_GT(reduce_scatter, 0);
      // Left: the loss statistics and the replicated parameters' gradients.
      EXPECT_LT(all_reduce, reduce_scatter / 4);
    } else {
      EXPECT_EQ(reduce_scatter, 0);
      EXPECT_GT(all_reduce, 0);
    }
  }
}

TEST(Tp, SequenceParallelWithTiedEmbeddingsAndFrozenParameters) {
  Config c = case_config({4, 2, true});
  c.model.tie_embeddings = true;
  c.model.frozen = {"blocks.0.ln1.weight", "pos_emb.weight"};
  test::expect_matches_reference(run_training(c));
}

TEST(Tp, ToyModels) {
  test::expect_toy_models_match_reference("tp");
}

TEST(Tp, EachRankHoldsItsShareOfTheShardedParameters) {
  Config c = test::tiny_config("tp", 4, 1);
  c.reference = false;
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  // tiny: 135k parameters, of which embeddings, attention, MLP and head matrices are split;
  // LayerNorms, the position embedding and row-parallel biases (about 3 k) are replicated.
  const int64_t full = 4 * s.parameters;
  for (const auto& r : s.ranks) {
    EXPECT_LT(r.memory.parameters, full / 4 + 4 * 3000);
    EXPECT_GT(r.memory.parameters, full / 4);
  }
}

}  // namespace
}  // namespace shardscope
