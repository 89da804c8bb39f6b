// reduce_sources (engine/comm/shm/reduce_ops.h), which every shm path reduces with: the values of
// a reduction in rank order, op by op, whatever the target aliases and wherever pieces end.
#include <gtest/gtest.h>

#include <vector>

#include <torch/torch.h>

#include "engine/comm/shm/reduce_ops.h"

namespace shardscope {
namespace {

constexpr int64_t kElements = 100003;  // three grain sizes and a ragged end

std::vector<torch::Tensor> rank_inputs(int world) {
  std::vector<torch::Tensor> inputs;
  for (int r = 0; r < world; ++r)
    inputs.push_back(
        torch::randn({kElements}, torch::Generator(at::detail::createCPUGenerator(7 + r))));
  return inputs;
}

std::vector<const uint8_t*> addresses(const std::vector<torch::Tensor>& inputs) {
  std::vector<const uint8_t*> out;
  for (const auto& t : inputs) out.push_back(shm::bytes_of(t));
  return out;
}

// The reference: whole tensors, one op at a time, in rank order.
torch::Tensor in_rank_order(const std::vector<torch::Tensor>& inputs, c10d::ReduceOp op) {
  torch::Tensor acc = inputs[0].clone();
  for (size_t r = 1; r < inputs.size(); ++r) {
    if (op == c10d::ReduceOp::MAX)
      acc = torch::maximum(acc, inputs[r]);
    else if (op == c10d::ReduceOp::PRODUCT)
      acc = acc * inputs[r];
    else
      acc = acc + inputs[r];
  }
  if (op == c10d::ReduceOp::AVG) acc = acc / static_cast<int64_t>(inputs.size());
  return acc;
}

TEST(ShmReduceOps, ReducesInRankOrderBitwiseWhateverTheTargetIs) {
  for (const auto op :
       {c10d::ReduceOp::SUM, c10d::ReduceOp::AVG, c10d::ReduceOp::MAX, c10d::ReduceOp::PRODUCT}) {
    for (int world : {1, 2, 4}) {
      const auto inputs = rank_inputs(world);
      const torch::Tensor expected = in_rank_order(inputs, op);
      // Into a tensor of its own.
      torch::Tensor out = torch::full({kElements}, 42.0f);
      shm::reduce_sources(out, addresses(inputs), op);
      EXPECT_TRUE(torch::equal(out, expected)) << "separate target, world " << world;
      // Into each source in turn: the first in place, a later one still read while reduced.
      for (int target = 0; target < world; ++target) {
        auto copies = rank_inputs(world);
        shm::reduce_sources(copies[target], addresses(copies), op);
        EXPECT_TRUE(torch::equal(copies[target], expected))
            << "target is source " << target << " of " << world;
        for (int r = 0; r < world; ++r) {
          if (r == target) continue;
          EXPECT_TRUE(torch::equal(copies[r], inputs[r])) << "source " << r;
        }
      }
    }
  }
}

// Each piece is handed on once it is final, in order, and the pieces cover the target once.
TEST(ShmReduceOps, HandsOnEveryPieceOnceItIsFinal) {
  const auto inputs = rank_inputs(3);
  const torch::Tensor expected = in_rank_order(inputs, c10d::ReduceOp::SUM);
  torch::Tensor out = torch::zeros({kElements});
  int64_t next = 0;
  int pieces = 0;
  shm::reduce_sources(out, addresses(inputs), c10d::ReduceOp::SUM, [&](int64_t at, int64_t n) {
    EXPECT_EQ(at, next);
    EXPECT_GT(n, 0);
    EXPECT_TRUE(torch::equal(out.narrow(0, at, n), expected.narrow(0, at, n))) << "piece at " << at;
    next = at + n;
    ++pieces;
  });
  EXPECT_EQ(next, kElements);
  EXPECT_GT(pieces, 1) << "a target larger than a piece is reduced in pieces";
}

}  // namespace
}  // namespace shardscope
