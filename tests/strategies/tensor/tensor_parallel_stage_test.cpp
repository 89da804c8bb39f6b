// Tensor-parallel shards are cut from the reference's initialisation: they differ from rank to
// rank, and gathered they are exactly the reference weights.
#include "strategies/tensor/tensor_parallel_stage.h"

#include <gtest/gtest.h>

#include <set>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "engine/comm/comm.h"
#include "strategies/tensor/tensor_parallel.h"
#include "tests/support/rank_threads.h"

namespace shardscope {
namespace {

TEST(TensorParallelStage, ShardsDifferAcrossRanksAndTogetherAreTheReferenceWeights) {
  Config config = config_from_json({{"preset", "tiny"}});
  GptModel reference(config.model, config.seed);
  std::map<std::string, torch::Tensor> expected;
  for (const auto& [name, p] : reference->named_params()) expected[name] = p.detach();

  for (int t : {2, 4}) {
    test::run_on_ranks(t, [&](RankContext& ctx) {
      TensorParallelStage stage(config, {0, config.model.layers, true, true}, *ctx.comm,
                                ctx.device);
      for (const auto& shard : stage.sharded()) {
        auto all = tp::all_gather_stacked(shard.detach(), *ctx.comm);
        if (!all.any().item<bool>()) continue;  // zero-initialised biases are alike everywhere
        for (int other = 0; other < t; ++other) {
          if (other == ctx.rank) continue;
          EXPECT_FALSE(torch::equal(all[ctx.rank], all[other]))
              << "rank " << ctx.rank << " and " << other << " hold the same shard";
        }
        EXPECT_EQ(shard.numel() * t, all.numel());
      }
      const auto gathered = stage.gathered_weights();
      EXPECT_EQ(gathered.size(), expected.size());
      for (const auto& [name, tensor] : gathered) {
        ASSERT_TRUE(expected.count(name)) << name;
        EXPECT_TRUE(torch::equal(tensor, expected[name])) << name << " at t " << t;
      }
    });
  }
}

TEST(TensorParallelStage, AStageHoldsOnlyItsBlocksAndEnds) {
  Config config = config_from_json({{"preset", "tiny"}});
  config.model.layers = 4;
  test::run_on_ranks(1, [&](RankContext& ctx) {
    TensorParallelStage middle(config, {1, 3, false, false}, *ctx.comm, ctx.device);
    for (const auto& [name, tensor] : middle.gathered_weights()) {
      EXPECT_TRUE(name.rfind("blocks.1.", 0) == 0 || name.rfind("blocks.2.", 0) == 0) << name;
    }
    TensorParallelStage last(config, {3, 4, false, true}, *ctx.comm, ctx.device);
    std::set<std::string> names;
    for (const auto& [name, tensor] : last.gathered_weights()) names.insert(name);
    EXPECT_TRUE(names.count("lm_head.weight"));
    EXPECT_TRUE(names.count("ln_f.weight"));
    EXPECT_FALSE(names.count("tok_emb.weight"));
    EXPECT_EQ(last.hidden_shape(3),
              (std::vector<int64_t>{3, config.model.seq, config.model.d_model}));
  });
}

}  // namespace
}  // namespace shardscope
