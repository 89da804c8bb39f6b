#include "engine/model/activation_checkpoint.h"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include "engine/model/gpt_model.h"

namespace shardscope {
namespace {

TEST(ActivationCheckpoint, RecomputesInBackwardAndGivesTheSameGradients) {
  torch::manual_seed(0);
  auto w = torch::randn({8, 8}, torch::requires_grad());
  auto x0 = torch::randn({4, 8}, torch::requires_grad());
  int calls = 0;
  auto fn = [&](const torch::Tensor& x) {
    ++calls;
    return torch::tanh(x.matmul(w)).matmul(w);
  };

  fn(x0).pow(2).sum().backward();
  auto plain_w = w.grad().clone(), plain_x = x0.grad().clone();
  w.mutable_grad() = torch::Tensor();
  x0.mutable_grad() = torch::Tensor();

  calls = 0;
  auto y = recompute_in_backward(fn, x0);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(y.requires_grad());
  y.pow(2).sum().backward();
  EXPECT_EQ(calls, 2) << "backward must run the function again";
  EXPECT_TRUE(torch::allclose(w.grad(), plain_w));
  EXPECT_TRUE(torch::allclose(x0.grad(), plain_x));
}

TEST(ActivationCheckpoint, GptModelGradientsAreUnchanged) {
  ModelConfig m;
  auto tokens = torch::randint(0, m.vocab, {2, m.seq + 1}, torch::kLong);
  Batch batch{tokens.narrow(1, 0, m.seq), tokens.narrow(1, 1, m.seq)};
  GptModel plain(m, 7), checkpointed(m, 7);
  checkpointed->activation_checkpointing = true;
  auto loss_plain = plain->loss(batch);
  auto loss_checkpointed = checkpointed->loss(batch);
  EXPECT_TRUE(torch::equal(loss_plain, loss_checkpointed));
  loss_plain.backward();
  loss_checkpointed.backward();
  auto a = plain->named_parameters(), b = checkpointed->named_parameters();
  for (const auto& item : a) {
    EXPECT_TRUE(torch::allclose(item.value().grad(), b[item.key()].grad(), 1e-6, 1e-7))
        << item.key();
  }
}

}  // namespace
}  // namespace shardscope
