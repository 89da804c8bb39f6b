#include <gtest/gtest.h>

#include <torch/torch.h>

#include "engine/weights.h"

namespace shardscope {
namespace {

NamedTensors sample() {
  return {{"a", torch::arange(6, torch::kFloat).view({2, 3})}, {"b", torch::full({4}, -2.0)}};
}

TEST(Weights, ChecksumSeesEveryBit) {
  auto w = sample();
  auto same = sample();
  EXPECT_EQ(weights_checksum(w), weights_checksum(same));
  same[1].second[2] = std::nextafter(-2.0f, 0.0f);
  EXPECT_NE(weights_checksum(w), weights_checksum(same));
}

TEST(Weights, DeviationIsRelativeToTheNormOfTheReference) {
  auto expected = sample();  // ||a||^2 = 0+1+4+9+16+25 = 55, ||b||^2 = 16: 71 in all
  auto actual = to_cpu_copy(expected);
  auto zero = compare_weights(actual, expected);
  EXPECT_EQ(zero.max_abs, 0.0);
  EXPECT_EQ(zero.rel, 0.0);
  actual[1].second[0] += 0.8;
  actual[1].second[1] -= 0.6;  // ||delta|| = 1 in "b"
  auto dev = compare_weights(actual, expected);
  EXPECT_NEAR(dev.max_abs, 0.8, 1e-6);
  EXPECT_NEAR(dev.rel, 1.0 / std::sqrt(71.0), 1e-6);
  EXPECT_EQ(dev.worst, "b");
  EXPECT_NEAR(dev.worst_rel, 1.0 / 4.0, 1e-6);
}

TEST(Weights, MismatchedSetsAreErrors) {
  auto expected = sample();
  NamedTensors fewer{expected[0]};
  EXPECT_THROW(compare_weights(fewer, expected), std::runtime_error);
  NamedTensors renamed{{"x", expected[0].second}, expected[1]};
  EXPECT_THROW(compare_weights(renamed, expected), std::runtime_error);
}

}  // namespace
}  // namespace shardscope
