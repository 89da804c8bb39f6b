#include <gtest/gtest.h>

#include <torch/torch.h>

#include "engine/model/gpt_model.h"
#include "engine/state/weights.h"

namespace shardscope {
namespace {

ModelConfig tiny() {
  return preset_model("tiny");
}

TEST(GptModel, LogitsHaveBatchTimeVocabShape) {
  GptModel model(tiny(), 1);
  auto tokens = torch::randint(0, 256, {3, 17}, torch::kLong);
  auto logits = model->forward(tokens);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 17, 256}));
  Batch batch{tokens, torch::randint(0, 256, {3, 17}, torch::kLong)};
  auto loss = model->loss(batch);
  EXPECT_EQ(loss.dim(), 0);
  // An untrained model is close to uniform: loss near ln(256).
  EXPECT_NEAR(loss.item<double>(), std::log(256.0), 0.5);
}

TEST(GptModel, FutureTokensDoNotChangePastLogits) {
  GptModel model(tiny(), 7);
  torch::NoGradGuard no_grad;
  auto tokens = torch::randint(0, 256, {2, 32}, torch::kLong);
  auto changed = tokens.clone();
  const int64_t t = 20;
  changed.index_put_({torch::indexing::Slice(), t},
                     (tokens.index({torch::indexing::Slice(), t}) + 1) % 256);
  auto a = model->forward(tokens), b = model->forward(changed);
  using torch::indexing::Slice;
  EXPECT_TRUE(
      torch::allclose(a.index({Slice(), Slice(0, t)}), b.index({Slice(), Slice(0, t)}), 0, 1e-6));
  // ...while the changed position and later ones do see it (so the check above can fail).
  EXPECT_FALSE(
      torch::allclose(a.index({Slice(), Slice(t)}), b.index({Slice(), Slice(t)}), 0, 1e-6));
}

TEST(GptModel, SameSeedGivesBitwiseIdenticalWeights) {
  GptModel a(tiny(), 42), b(tiny(), 42), c(tiny(), 43);
  EXPECT_EQ(weights_checksum(a->named_params()), weights_checksum(b->named_params()));
  EXPECT_NE(weights_checksum(a->named_params()), weights_checksum(c->named_params()));
}

TEST(GptModel, InitialisationOfAParameterDependsOnlyOnSeedAndName) {
  ModelConfig deeper = tiny();
  deeper.layers = 4;
  GptModel a(tiny(), 5), b(deeper, 5);
  auto pa = a->named_parameters(), pb = b->named_parameters();
  EXPECT_TRUE(torch::equal(*pa.find("blocks.1.mlp.fc.weight"), *pb.find("blocks.1.mlp.fc.weight")));
}

TEST(GptModel, ParametersHaveStableNames) {
  GptModel model(tiny(), 1);
  std::vector<std::string> names;
  for (const auto& [name, p] : model->named_params()) names.push_back(name);
  const std::vector<std::string> head{"tok_emb.weight",           "pos_emb.weight",
                                      "blocks.0.ln1.weight",      "blocks.0.ln1.bias",
                                      "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias",
                                      "blocks.0.attn.proj.weight"};
  ASSERT_GE(names.size(), head.size());
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + head.size()), head);
  EXPECT_EQ(names.back(), "lm_head.weight");
}

TEST(GptModel, ParameterCountFormulaMatchesTheBuiltModel) {
  ModelConfig variant = tiny();
  variant.tie_embeddings = true;
  variant.unused_parameter = true;
  variant.mlp_ratio = 3;
  for (const ModelConfig& c : {tiny(), preset_model("small"), variant}) {
    EXPECT_EQ(parameter_count(c), GptModel(c, 1)->parameter_count());
  }
}

TEST(GptModel, PresetSizes) {
  EXPECT_LT(GptModel(preset_model("tiny"), 1)->parameter_count(), 1'000'000);
  auto small = GptModel(preset_model("small"), 1)->parameter_count();
  EXPECT_GT(small, 9'000'000);
  EXPECT_LT(small, 12'000'000);
}

TEST(GptModel, VariantsForDdpCornerCases) {
  ModelConfig c = tiny();
  c.tie_embeddings = true;
  c.unused_parameter = true;
  c.frozen = {"blocks.0.attn.qkv.bias"};
  GptModel model(c, 1);
  auto params = model->named_parameters();
  EXPECT_EQ(params.find("lm_head.weight"), nullptr);
  ASSERT_NE(params.find("unused"), nullptr);
  EXPECT_FALSE(params.find("blocks.0.attn.qkv.bias")->requires_grad());
  c.frozen = {"no.such.parameter"};
  EXPECT_THROW(GptModel(c, 1), ConfigError);
}

}  // namespace
}  // namespace shardscope
