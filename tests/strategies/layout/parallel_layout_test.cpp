// The rank layout of tp / pp / hybrid: coordinates and groups against Megatron's numbering,
// degrees derived from the config, balanced stages, and every invalid layout rejected with the
// field named.
#include "strategies/layout/parallel_layout.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/model/gpt_model.h"

namespace shardscope {
namespace {

Config layout_config(const std::string& strategy, int world, nlohmann::json options) {
  Config c = config_from_json({{"preset", "tiny"}, {"strategy", strategy}});
  c.world = world;
  c.model.layers = 4;
  apply_json(c, {{"strategy_options", options}});
  return c;
}

TEST(ParallelLayout, NumbersTensorRanksFirstThenDataThenPipeline) {
  const ParallelLayout layout{/*data=*/2, /*pipeline=*/2, /*tensor=*/2};
  // rank = (pipeline * d + data) * t + tensor
  EXPECT_EQ(layout.tensor_group(5), (std::vector<int>{4, 5}));
  EXPECT_EQ(layout.data_group(5), (std::vector<int>{5, 7}));
  EXPECT_EQ(layout.pipeline_group(5), (std::vector<int>{1, 5}));
  EXPECT_EQ(layout.model_group(5), (std::vector<int>{0, 1, 4, 5}));
  for (int r = 0; r < layout.world(); ++r) EXPECT_EQ(layout.rank_of(layout.coordinates(r)), r);
  const auto at = layout.coordinates(6);
  EXPECT_EQ(at.pipeline, 1);
  EXPECT_EQ(at.data, 1);
  EXPECT_EQ(at.tensor, 0);
  EXPECT_EQ(layout.describe(), "dp2 x tp2 x pp2");
}

// Context ranks sit between tensor and data: rank = ((pipeline d + data) c + context) t + tensor.
TEST(ParallelLayout, ContextRanksSitBetweenTensorAndData) {
  ParallelLayout layout{/*data=*/2, /*pipeline=*/1, /*tensor=*/2};
  layout.context = 2;
  ASSERT_EQ(layout.world(), 8);
  const auto at = layout.coordinates(6);  // data 1, context 1, tensor 0
  EXPECT_EQ(at.data, 1);
  EXPECT_EQ(at.context, 1);
  EXPECT_EQ(at.tensor, 0);
  for (int r = 0; r < layout.world(); ++r) EXPECT_EQ(layout.rank_of(layout.coordinates(r)), r);
  EXPECT_EQ(layout.tensor_group(6), (std::vector<int>{6, 7}));
  EXPECT_EQ(layout.context_group(6), (std::vector<int>{4, 6}));
  EXPECT_EQ(layout.data_group(6), (std::vector<int>{2, 6}));
  EXPECT_EQ(layout.gradient_group(6), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(layout.model_group(6), (std::vector<int>{6, 7}));
  EXPECT_EQ(layout.replica_group(6), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(layout.describe(), "dp2 x cp2 x tp2");
  // From a configuration: hybrid's data dimension takes what tp and cp leave.
  const ParallelLayout from =
      layout_of(layout_config("hybrid", 8, {{"tensor_parallel", 2}, {"context_parallel", 2}}));
  EXPECT_EQ(from.data, 2);
  EXPECT_EQ(from.context, 2);
  EXPECT_EQ(from.tensor, 2);
}

TEST(ParallelLayout, EachStrategyTakesTheRestOfTheWorldInItsOwnDimension) {
  auto degrees = [](const ParallelLayout& l) {
    return std::vector<int>{l.data, l.tensor, l.pipeline};
  };
  EXPECT_EQ(degrees(layout_of(layout_config("tp", 4, nlohmann::json::object()))),
            (std::vector<int>{1, 4, 1}));
  EXPECT_EQ(degrees(layout_of(layout_config("tp", 4, {{"tensor_parallel", 2}}))),
            (std::vector<int>{2, 2, 1}));
  EXPECT_EQ(degrees(layout_of(layout_config("pp", 4, nlohmann::json::object()))),
            (std::vector<int>{1, 1, 4}));
  EXPECT_EQ(degrees(layout_of(layout_config("pp", 8, {{"data_parallel", 2}}))),
            (std::vector<int>{2, 1, 4}));
  EXPECT_EQ(degrees(layout_of(
                layout_config("hybrid", 8, {{"tensor_parallel", 2}, {"pipeline_parallel", 2}}))),
            (std::vector<int>{2, 2, 2}));
}

TEST(ParallelLayout, StagesAreContiguousAndParameterBalanced) {
  ModelConfig m = preset_model("small");  // 6 blocks; the embeddings weigh about half a block
  for (int p : {1, 2, 3, 6}) {
    const auto stages = stage_blocks(m, p);
    ASSERT_EQ(static_cast<int>(stages.size()), p);
    EXPECT_EQ(stages.front().first, 0);
    EXPECT_EQ(stages.back().second, m.layers);
    for (int s = 0; s < p; ++s) {
      EXPECT_LT(stages[s].first, stages[s].second) << "stage " << s << " has no block";
      if (s > 0) {
        EXPECT_EQ(stages[s].first, stages[s - 1].second);
      }
    }
  }
  // A huge vocabulary makes the first and last stages heavy: they get fewer blocks.
  m.vocab = 50000;
  m.layers = 8;
  const auto stages = stage_blocks(m, 4);
  EXPECT_LT(stages[0].second - stages[0].first, stages[1].second - stages[1].first);
  EXPECT_LT(stages[3].second - stages[3].first, stages[2].second - stages[2].first);
}

TEST(ParallelLayout, MicroBatchesDefaultToOnePerStage) {
  Config c = layout_config("pp", 4, nlohmann::json::object());
  EXPECT_EQ(pipeline_micro_batches(c, layout_of(c)), 4);
  c.strategy_options.micro_batches = 8;
  EXPECT_EQ(pipeline_micro_batches(c, layout_of(c)), 8);
}

// Invalid layouts: rejected by validation (before any rank starts) with the field named.
TEST(ParallelLayout, InvalidLayoutsAreRejectedWithTheFieldNamed) {
  struct Bad {
    std::string strategy;
    int world;
    nlohmann::json overrides;
    std::string field;
  };
  const std::vector<Bad> cases = {
      {"tp", 4, {{"model", {{"heads", 2}}}}, "model.heads"},
      {"tp", 3, {{"model", {{"vocab", 256}}}}, "model.heads"},
      {"tp",
       2,
       {{"strategy_options", {{"tensor_parallel", 3}}}},
       "strategy_options.tensor_parallel"},
      {"tp",
       4,
       {{"strategy_options", {{"pipeline_parallel", 2}}}},
       "strategy_options.pipeline_parallel"},
      {"pp",
       4,
       {{"strategy_options", {{"tensor_parallel", 2}}}},
       "strategy_options.tensor_parallel"},
      {"pp", 8, {{"model", {{"layers", 4}}}}, "strategy_options.pipeline_parallel"},
      {"pp", 2, {{"model", {{"tie_embeddings", true}}}}, "model.tie_embeddings"},
      {"pp", 2, {{"strategy_options", {{"micro_batches", 3}}}}, "strategy_options.micro_batches"},
      {"pp", 2, {{"strategy_options", {{"schedule", "zigzag"}}}}, "strategy_options.schedule"},
      {"hybrid",
       8,
       {{"strategy_options",
         {{"tensor_parallel", 2}, {"pipeline_parallel", 2}, {"data_parallel", 3}}}},
       "strategy_options.data_parallel"},
      {"hybrid",
       8,
       {{"strategy_options", {{"tensor_parallel", 3}}}},
       "strategy_options.data_parallel"},
      {"hybrid",
       4,
       {{"strategy_options", {{"data_parallel_sync", "fsdp"}}}},
       "strategy_options.data_parallel_sync"},
      {"hybrid",
       4,
       {{"strategy_options", {{"sequence_parallel", true}}}},
       "strategy_options.sequence_parallel"},
      {"tp",
       2,
       {{"strategy_options", {{"tensor_parallel", 2}, {"micro_batches", 2}}}},
       "strategy_options.micro_batches"},
      {"tp",
       2,
       {{"strategy_options", {{"sequence_parallel", true}}}, {"model", {{"seq", 33}}}},
       "model.seq"},
      {"ddp_bucketed",
       2,
       {{"strategy_options", {{"pipeline_parallel", 2}}}},
       "strategy_options.pipeline_parallel"},
      {"pp",
       2,
       {{"strategy_options", {{"activation_checkpointing", true}}}},
       "strategy_options.activation_checkpointing"},
      {"hybrid",
       4,
       {{"strategy_options", {{"tensor_parallel", 2}, {"offload", true}}}},
       "strategy_options.offload"},
      {"hybrid",
       4,
       {{"strategy_options", {{"pipeline_parallel", 2}}}, {"model", {{"unused_parameter", true}}}},
       "strategy_options.find_unused_parameters"},
  };
  for (const auto& bad : cases) {
    Config c = config_from_json({{"preset", "tiny"}, {"strategy", bad.strategy}});
    c.world = bad.world;
    apply_json(c, bad.overrides);
    try {
      validate(c);
      ADD_FAILURE() << bad.strategy << " " << bad.overrides.dump() << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.field(), bad.field)
          << bad.strategy << " " << bad.overrides.dump() << ": " << e.what();
    }
  }
}

// A vocabulary that does not divide over the tensor group: the error names the size Megatron pads
// it to, a multiple of 128 times the degree (GPT-2's 50257 at t 8: 51200).
TEST(ParallelLayout, AVocabularyThatDoesNotDivideNamesTheSizeMegatronPadsItTo) {
  Config c = config_from_json({{"preset", "tiny"}, {"strategy", "tp"}});
  c.world = 8;
  apply_json(c, {{"model", {{"vocab", 50257}, {"heads", 8}, {"d_model", 64}}}});
  try {
    validate(c);
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "model.vocab");
    EXPECT_NE(std::string(e.what()).find("51200"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardscope
