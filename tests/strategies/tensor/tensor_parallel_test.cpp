// Tensor-parallel building blocks against their unsharded versions: outputs and the gradients of
// weights, biases and inputs, at t = 2 and 4.
#include "strategies/tensor/tensor_parallel.h"

#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "tests/support/rank_threads.h"

namespace shardscope {
namespace {

namespace F = torch::nn::functional;

// Deterministic without touching the global generator, which rank threads share.
torch::Tensor random(std::vector<int64_t> shape, uint64_t seed) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randn(shape, generator, torch::kFloat);
}

void expect_close(const torch::Tensor& actual, const torch::Tensor& expected, const char* what,
                  int rank) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what << " on rank " << rank;
  EXPECT_TRUE(torch::allclose(actual, expected, 1e-5, 1e-5))
      << what << " on rank " << rank << ": max |delta| "
      << (actual - expected).abs().max().item<double>();
}

class TensorParallel : public testing::TestWithParam<int> {};

TEST_P(TensorParallel, ColumnParallelLinearMatchesTheFullLayer) {
  const int t = GetParam();
  test::run_on_ranks(t, [&](RankContext& ctx) {
    const int r = ctx.rank;
    auto w = random({8, 6}, 1).requires_grad_(), b = random({8}, 2).requires_grad_();
    auto x = random({3, 5, 6}, 3).requires_grad_();
    auto probe = random({3, 5, 8}, 4);
    auto y = F::linear(x, w, b);
    (y * probe).sum().backward();

    auto w_shard = tp::shard_of(w.detach(), 0, r, t).requires_grad_();
    auto b_shard = tp::shard_of(b.detach(), 0, r, t).requires_grad_();
    auto x_local = x.detach().clone().requires_grad_();
    auto y_shard = tp::column_parallel_linear(x_local, w_shard, b_shard, *ctx.comm);
    expect_close(y_shard, tp::shard_of(y.detach(), 2, r, t), "output", r);
    (y_shard * tp::shard_of(probe, 2, r, t)).sum().backward();
    expect_close(w_shard.grad(), tp::shard_of(w.grad(), 0, r, t), "weight grad", r);
    expect_close(b_shard.grad(), tp::shard_of(b.grad(), 0, r, t), "bias grad", r);
    expect_close(x_local.grad(), x.grad(), "input grad (all-reduced)", r);

    // Gathering the column shards gives the full output back.
    expect_close(tp::gather_last_dim(y_shard.detach(), *ctx.comm), y.detach(), "gathered", r);
  });
}

TEST_P(TensorParallel, RowParallelLinearMatchesTheFullLayer) {
  const int t = GetParam();
  test::run_on_ranks(t, [&](RankContext& ctx) {
    const int r = ctx.rank;
    auto w = random({6, 8}, 5).requires_grad_(), b = random({6}, 6).requires_grad_();
    auto x = random({3, 5, 8}, 7).requires_grad_();
    auto probe = random({3, 5, 6}, 8);
    auto y = F::linear(x, w, b);
    (y * probe).sum().backward();

    auto w_shard = tp::shard_of(w.detach(), 1, r, t).requires_grad_();
    auto b_local = b.detach().clone().requires_grad_();
    auto x_shard = tp::shard_of(x.detach(), 2, r, t).requires_grad_();
    auto y_full = tp::row_parallel_linear(x_shard, w_shard, b_local, *ctx.comm);
    expect_close(y_full, y.detach(), "output", r);
    (y_full * probe).sum().backward();
    expect_close(w_shard.grad(), tp::shard_of(w.grad(), 1, r, t), "weight grad", r);
    expect_close(b_local.grad(), b.grad(), "bias grad", r);
    expect_close(x_shard.grad(), tp::shard_of(x.grad(), 2, r, t), "input grad", r);
  });
}

TEST_P(TensorParallel, VocabParallelEmbeddingMatchesTheFullTable) {
  const int t = GetParam();
  test::run_on_ranks(t, [&](RankContext& ctx) {
    const int r = ctx.rank;
    const int64_t vocab = 16;
    auto table = random({vocab, 4}, 9).requires_grad_();
    auto tokens = torch::tensor({{0, 5, 15, 7}, {3, 3, 12, 8}}, torch::kLong);
    auto probe = random({2, 4, 4}, 10);
    auto e = F::embedding(tokens, table);
    (e * probe).sum().backward();

    auto shard = tp::shard_of(table.detach(), 0, r, t).requires_grad_();
    auto e_tp = tp::vocab_parallel_embedding(tokens, shard, r * vocab / t, *ctx.comm);
    expect_close(e_tp, e.detach(), "output", r);
    (e_tp * probe).sum().backward();
    expect_close(shard.grad(), tp::shard_of(table.grad(), 0, r, t), "table grad", r);
  });
}

TEST_P(TensorParallel, VocabParallelCrossEntropyMatchesTheFullLoss) {
  const int t = GetParam();
  test::run_on_ranks(t, [&](RankContext& ctx) {
    const int r = ctx.rank;
    const int64_t vocab = 16;
    auto logits = (random({6, vocab}, 11) * 4).requires_grad_();
    auto targets = torch::tensor({0, 15, 7, 8, 3, 12}, torch::kLong);
    auto loss = F::cross_entropy(logits, targets);
    loss.backward();

    auto shard = tp::shard_of(logits.detach(), 1, r, t).requires_grad_();
    auto loss_tp = tp::vocab_parallel_cross_entropy(shard, targets, r * vocab / t, *ctx.comm);
    expect_close(loss_tp, loss.detach(), "loss", r);
    loss_tp.backward();
    expect_close(shard.grad(), tp::shard_of(logits.grad(), 1, r, t), "logit grad", r);
  });
}

INSTANTIATE_TEST_SUITE_P(Degrees, TensorParallel, testing::Values(2, 4),
                         [](const auto& info) { return "t" + std::to_string(info.param); });

}  // namespace
}  // namespace shardscope
