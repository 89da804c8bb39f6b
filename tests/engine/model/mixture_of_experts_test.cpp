// The mixture-of-experts MLP (engine/model/gpt_model.h): dropless top-k routing equals the textbook
// sum over each token's k experts weighted by its renormalised router probabilities; every
// expert gets a gradient even when no token reaches it; the parameter count and the memory the
// forward saves match the formulas.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "engine/model/gpt_model.h"
#include "engine/train/config.h"
#include "engine/train/config_bounds.h"
#include "profiling/projection/memory_projection.h"

namespace shardscope {
namespace {

// Token by token, expert by expert: what the routing must compute.
torch::Tensor textbook(MoeImpl& moe, const torch::Tensor& x) {
  torch::NoGradGuard no_grad;
  const auto tokens = x.reshape({-1, x.size(-1)});
  const auto probabilities = torch::softmax(moe.router->forward(tokens), -1);
  auto out = torch::zeros_like(tokens);
  for (int64_t n = 0; n < tokens.size(0); ++n) {
    auto [p, e] = probabilities[n].topk(moe.top_k);
    if (moe.top_k > 1) p = p / p.sum();
    for (int64_t j = 0; j < moe.top_k; ++j) {
      auto* expert = moe.experts[e[j].item<int64_t>()]->as<Mlp>();
      out[n] += p[j] * expert->forward(tokens[n].unsqueeze(0))[0];
    }
  }
  return out.view(x.sizes());
}

TEST(MixtureOfExperts, RoutesEveryTokenToItsTopKExpertsWeightedByTheRouter) {
  torch::manual_seed(3);
  for (int k : {1, 2, 4}) {
    Moe moe(16, 32, 4, k);
    const auto x = torch::randn({3, 5, 16});
    const auto routed = moe->forward(x);
    EXPECT_TRUE(torch::allclose(routed, textbook(*moe, x), 1e-5, 1e-6)) << "top " << k;
    int64_t sent = 0;
    for (int64_t n : moe->tokens_per_expert) sent += n;
    EXPECT_EQ(sent, 3 * 5 * k) << "dropless: every token reaches its k experts";
  }
}

TEST(MixtureOfExperts, AnExpertNoTokenReachesStillGetsAGradient) {
  Moe moe(8, 16, 4, 1);
  {
    torch::NoGradGuard no_grad;
    moe->router->weight.zero_();
    moe->router->weight[2].fill_(1.0);  // positive inputs all go to expert 2
  }
  const auto x = torch::rand({2, 6, 8}) + 0.1;
  moe->forward(x).sum().backward();
  EXPECT_EQ(moe->tokens_per_expert, (std::vector<int64_t>{0, 0, 12, 0}));
  for (const auto& p : moe->parameters()) {
    ASSERT_TRUE(p.grad().defined());
  }
  EXPECT_EQ(moe->experts[0]->as<Mlp>()->fc->weight.grad().abs().sum().item<double>(), 0.0);
  EXPECT_GT(moe->experts[2]->as<Mlp>()->fc->weight.grad().abs().sum().item<double>(), 0.0);
  // Top-1 weighs by the probability itself: the router learns (renormalised, it would not).
  EXPECT_GT(moe->router->weight.grad().abs().sum().item<double>(), 1e-6);
}

TEST(MixtureOfExperts, ParameterCountsAgreeWithTheModelAndTheProjection) {
  ModelConfig m = preset_model("tiny");
  m.experts = 8;
  m.top_k = 2;
  GptModel model(m, 1);
  EXPECT_EQ(model->parameter_count(), parameter_count(m));
  EXPECT_EQ(profiling::model_parameters(model_shape(m)), parameter_count(m));
  ModelConfig dense = preset_model("tiny");
  const int64_t d = m.d_model, hidden = d * m.mlp_ratio;
  EXPECT_EQ(parameter_count(m) - parameter_count(dense),
            m.layers * (7 * (2 * d * hidden + hidden + d) + d * 8));
  const auto names = parameter_names(m);
  EXPECT_NE(std::find(names.begin(), names.end(), "blocks.1.moe.experts.7.proj.weight"),
            names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "blocks.0.moe.router.weight"), names.end());
}

}  // namespace
}  // namespace shardscope
