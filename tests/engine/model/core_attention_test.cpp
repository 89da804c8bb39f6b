// The block's attention kernels (engine/model/core_attention.h): unfused attention against
// PyTorch's scaled_dot_product_attention, selective recompute against keeping everything, and a
// whole GPT trained with each.
#include "engine/model/core_attention.h"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include "engine/model/gpt_model.h"

namespace shardscope {
namespace {

struct Grads {
  torch::Tensor out, q, k, v;
};

Grads run(bool unfused, const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0) {
  auto q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(),
       v = v0.clone().requires_grad_();
  auto out = causal_attention(q, k, v, unfused);
  out.pow(2).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

TEST(CoreAttention, UnfusedEqualsScaledDotProductAttentionForwardAndBackward) {
  torch::manual_seed(0);
  // [batch, heads, time, head size], q, k and v as the qkv Linear's views give them.
  auto qkv = torch::randn({2, 9, 3, 4, 8}, torch::kDouble);
  auto q = qkv.select(2, 0).transpose(1, 2), k = qkv.select(2, 1).transpose(1, 2),
       v = qkv.select(2, 2).transpose(1, 2);
  const Grads sdpa = run(false, q, k, v), unfused = run(true, q, k, v);
  EXPECT_TRUE(torch::allclose(unfused.out, sdpa.out, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(unfused.q, sdpa.q, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(unfused.k, sdpa.k, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(unfused.v, sdpa.v, 1e-12, 1e-12));
  // Causal: the first position sees only itself, so its output is its own value.
  EXPECT_TRUE(torch::allclose(unfused.out.select(2, 0), v.select(2, 0), 1e-12, 1e-12));
}

TEST(CoreAttention, SelectiveRecomputeGivesTheSameGradientsBitForBit) {
  torch::manual_seed(1);
  const auto qkv0 = torch::randn({2, 7, 3 * 12});
  for (const bool unfused : {false, true}) {
    SCOPED_TRACE(unfused ? "unfused" : "sdpa");
    torch::Tensor grads[2], outs[2];
    for (const bool recompute : {false, true}) {
      AttentionSettings settings;
      settings.unfused = unfused;
      settings.recompute = recompute;
      auto qkv = qkv0.clone().requires_grad_();
      auto out = attention_of_qkv(qkv, 3, settings);
      out.pow(2).sum().backward();
      outs[recompute] = out.detach();
      grads[recompute] = qkv.grad();
    }
    EXPECT_TRUE(torch::equal(outs[0], outs[1]));
    EXPECT_TRUE(torch::equal(grads[0], grads[1]));
  }
}

TEST(CoreAttention, KernelsAreNamedAndUnknownOnesAreNot) {
  EXPECT_TRUE(is_attention_kernel("sdpa"));
  EXPECT_TRUE(is_attention_kernel("unfused"));
  EXPECT_FALSE(is_attention_kernel("flash"));
  EXPECT_FALSE(is_attention_kernel(""));
  ModelConfig m;
  m.attention = "unfused";
  m.selective_recompute = true;
  const AttentionSettings settings = attention_settings(m);
  EXPECT_TRUE(settings.unfused);
  EXPECT_TRUE(settings.recompute);
  EXPECT_FALSE(settings.replace);
}

// A GPT whose blocks run unfused attention learns as one with SDPA, to rounding: the same
// weights give the same loss and gradients.
TEST(CoreAttention, AGptWithUnfusedAttentionHasTheSameLossAndGradients) {
  ModelConfig sdpa;
  sdpa.layers = 2;
  ModelConfig unfused = sdpa;
  unfused.attention = "unfused";
  unfused.selective_recompute = true;
  auto tokens = torch::randint(0, sdpa.vocab, {2, sdpa.seq + 1}, torch::kLong);
  const Batch batch{tokens.narrow(1, 0, sdpa.seq), tokens.narrow(1, 1, sdpa.seq)};
  GptModel a(sdpa, 7), b(unfused, 7);
  for (const auto& block : *b->blocks) {
    const AttentionSettings& settings = block->as<Block>()->attn->attention;
    EXPECT_TRUE(settings.unfused);
    EXPECT_TRUE(settings.recompute);
  }
  auto la = a->loss(batch), lb = b->loss(batch);
  la.backward();
  lb.backward();
  EXPECT_NEAR(la.item<double>(), lb.item<double>(), 1e-6);
  const auto pa = a->named_params(), pb = b->named_params();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::allclose(pa[i].second.grad(), pb[i].second.grad(), 1e-4, 1e-6))
        << pa[i].first;
  }
}

}  // namespace
}  // namespace shardscope
