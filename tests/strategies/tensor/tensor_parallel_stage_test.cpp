// Tensor-parallel shards are cut from the reference's initialisation: they differ from rank to
// rank, and gathered they are exactly the reference weights.
#include "strategies/tensor/tensor_parallel_stage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <set>

#include <ATen/record_function.h>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "engine/comm/comm.h"
#include "engine/model/mixed_precision.h"
#include "strategies/pipeline/split_backward.h"
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

std::atomic<int> casts{0};

std::unique_ptr<at::ObserverContext> count_cast(const at::RecordFunction& fn) {
  if (std::string(fn.name()) == "aten::_to_copy") ++casts;
  return nullptr;
}

struct MicroBatches {
  std::vector<int> casts_per_forward;
  std::vector<torch::Tensor> gradients;
};

// Three micro-batches through a middle stage of two blocks in bf16, each forward under its own
// precision scope; then each its whole backward, or (split) every input pass before the weight
// passes, as the zero-bubble schedules order them.
MicroBatches three_micro_batches(bool share, bool split) {
  Config config = config_from_json({{"preset", "tiny"}});
  config.strategy_options.precision = "bf16";
  config.model.layers = 4;
  MicroBatches r;
  test::run_on_ranks(1, [&](RankContext& ctx) {
    TensorParallelStage stage(config, {1, 3, false, false}, *ctx.comm, ctx.device);
    stage.share_weight_casts(share);
    std::vector<std::optional<SplitBackward>> splits(3);
    auto handle = at::addGlobalCallback(at::RecordFunctionCallback(count_cast));
    for (int micro = 0; micro < 3; ++micro) {
      torch::manual_seed(micro);
      auto input = torch::randn(stage.hidden_shape(2)).requires_grad_(true);
      const auto output_grad = torch::randn(stage.hidden_shape(2));
      torch::Tensor output;
      casts = 0;
      {
        ComputePrecisionScope precision(config.strategy_options, c10::DeviceType::CPU);
        output = stage.forward(input, {});
      }
      r.casts_per_forward.push_back(casts.load());
      if (split) {
        splits[micro].emplace();
        splits[micro]->input_pass(output, output_grad.to(output.dtype()), input, stage.trainable());
      } else {
        output.backward(output_grad.to(output.dtype()));
      }
    }
    at::removeCallback(handle);
    for (auto& s : splits) {
      if (s) s->weight_pass();
    }
    stage.share_weight_casts(false);
    for (const auto& p : stage.trainable())
      r.gradients.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  });
  return r;
}

// A pipeline stage's micro-batches share one bf16 copy of each Linear's weight over a step
// (PipelineRuntime turns it on): only the first forward casts the four weights of each block,
// and the gradients are bit for bit those of casting in every forward, whole or split backward.
TEST(TensorParallelStage, MicroBatchesSharingWeightCastsTrainBitForBitAsCastingEachForward) {
  for (bool split : {false, true}) {
    const MicroBatches own = three_micro_batches(false, split);
    const MicroBatches shared = three_micro_batches(true, split);
    EXPECT_EQ(own.casts_per_forward[1], own.casts_per_forward[0]);
    EXPECT_EQ(shared.casts_per_forward[0], own.casts_per_forward[0]);
    EXPECT_EQ(shared.casts_per_forward[0] - shared.casts_per_forward[1], 2 * 4)
        << "two blocks, four Linear weights each, cast once";
    EXPECT_EQ(shared.casts_per_forward[2], shared.casts_per_forward[1]);
    ASSERT_EQ(own.gradients.size(), shared.gradients.size());
    for (size_t i = 0; i < own.gradients.size(); ++i) {
      ASSERT_TRUE(own.gradients[i].defined()) << "parameter " << i << (split ? ", split" : "");
      EXPECT_TRUE(torch::equal(own.gradients[i], shared.gradients[i]))
          << "parameter " << i << (split ? ", split" : "");
    }
  }
}

}  // namespace
}  // namespace shardscope
