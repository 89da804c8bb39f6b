// The zero-bubble split of a backward pass: an input pass and a later weight pass give exactly
// the gradients of one whole backward, also at a GPT block's width, where the time of each pass
// is printed (issue 23).
#include "strategies/pipeline/split_backward.h"

#include <gtest/gtest.h>

#include <chrono>

#include <torch/torch.h>

namespace shardscope {
namespace {

namespace F = torch::nn::functional;

// Pre-LayerNorm MLP blocks with residuals, the shape of the GPT's: LayerNorm weights and biases
// and two matmuls per block.
torch::Tensor blocks(const torch::Tensor& x, const std::vector<torch::Tensor>& w) {
  torch::Tensor h = x;
  for (size_t l = 0; l + 3 < w.size(); l += 4) {
    auto normed =
        F::layer_norm(h, F::LayerNormFuncOptions({h.size(-1)}).weight(w[l]).bias(w[l + 1]));
    h = h + F::linear(F::gelu(F::linear(normed, w[l + 2])), w[l + 3]);
  }
  return h;
}

std::vector<torch::Tensor> weights(int64_t d, int layers) {
  torch::manual_seed(0);
  std::vector<torch::Tensor> w;
  for (int l = 0; l < layers; ++l) {
    w.push_back(torch::ones({d}).requires_grad_());
    w.push_back(torch::zeros({d}).requires_grad_());
    w.push_back((torch::randn({4 * d, d}) * 0.02).requires_grad_());
    w.push_back((torch::randn({d, 4 * d}) * 0.02).requires_grad_());
  }
  return w;
}

TEST(SplitBackward, InputThenWeightPassEqualsOneBackward) {
  auto w = weights(16, 2);
  const auto x0 = torch::randn({8, 16}), g = torch::randn({8, 16});
  auto x = x0.clone().requires_grad_();
  blocks(x, w).backward(g);
  std::vector<torch::Tensor> whole;
  for (auto& p : w) whole.push_back(p.grad().clone());
  const auto whole_input = x.grad().clone();

  for (auto& p : w) p.mutable_grad() = torch::Tensor();
  auto x2 = x0.clone().requires_grad_();
  SplitBackward split;
  const auto input_grad = split.input_pass(blocks(x2, w), g, x2, w);
  EXPECT_TRUE(torch::equal(input_grad, whole_input));
  for (auto& p : w) EXPECT_FALSE(p.grad().defined()) << "the input pass touched a weight";
  split.weight_pass();
  for (size_t k = 0; k < w.size(); ++k) {
    ASSERT_TRUE(w[k].grad().defined()) << k;
    EXPECT_TRUE(torch::allclose(w[k].grad(), whole[k], 0, 1e-7)) << k;
  }
  // A second micro-batch accumulates, as a backward would.
  auto x3 = x0.clone().requires_grad_();
  split.input_pass(blocks(x3, w), g, x3, w);
  split.weight_pass();
  EXPECT_TRUE(torch::allclose(w[2].grad(), 2 * whole[2], 0, 1e-6));
}

// At a GPT block's width the split still gives a whole backward's gradients, pass by pass; the
// three passes' times are printed (the weight pass should cost about the weight matmuls, half
// of a backward's, not a second backward), never asserted.
TEST(SplitBackward, AtBlockWidthMatchesAWholeBackwardAndPrintsEachPassTime) {
  auto w = weights(256, 2);
  const auto x0 = torch::randn({1024, 256}), g = torch::randn({1024, 256});
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  auto clear = [&] {
    for (auto& p : w) p.mutable_grad() = torch::Tensor();
  };
  double whole = 0, input = 0, weight = 0;
  for (int rep = 0; rep < 6; ++rep) {
    clear();
    auto x = x0.clone().requires_grad_();
    auto y = blocks(x, w);
    const auto t0 = Clock::now();
    y.backward(g);
    const auto t1 = Clock::now();
    std::vector<torch::Tensor> expected;
    for (auto& p : w) expected.push_back(p.grad().clone());
    clear();
    auto x2 = x0.clone().requires_grad_();
    auto y2 = blocks(x2, w);
    SplitBackward split;
    const auto t2 = Clock::now();
    const auto input_grad = split.input_pass(y2, g, x2, w);
    const auto t3 = Clock::now();
    split.weight_pass();
    const auto t4 = Clock::now();
    ASSERT_TRUE(torch::allclose(input_grad, x.grad(), 1e-5, 1e-6)) << "rep " << rep;
    for (size_t k = 0; k < w.size(); ++k) {
      ASSERT_TRUE(torch::allclose(w[k].grad(), expected[k], 1e-5, 1e-6))
          << "rep " << rep << ", weight " << k;
    }
    if (rep == 0) continue;  // warm-up
    whole += seconds(t0, t1);
    input += seconds(t2, t3);
    weight += seconds(t3, t4);
  }
  std::printf("backward %.2f ms, input pass %.2f ms, weight pass %.2f ms\n", whole / 5 * 1e3,
              input / 5 * 1e3, weight / 5 * 1e3);
}

}  // namespace
}  // namespace shardscope
