#include <gtest/gtest.h>

#include <fstream>

#include <torch/torch.h>

#include "engine/state/weights.h"
#include "tests/support/temp_dir.h"

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

// What export_weights writes reads back in the file's order, bitwise; names not in alphabetical
// order show that the order is the file's, not a sorted map's.
TEST(Weights, ExportedWeightsReadBackInOrder) {
  const auto dir = test::test_temp_dir();
  NamedTensors weights{{"z.last_first", torch::randn({3, 2})}, {"a", torch::arange(5.0)}};
  const std::string path = (dir / "w.pt").string();
  export_weights(path, weights);
  const NamedTensors back = read_exported_weights(path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].first, "z.last_first");
  EXPECT_EQ(back[1].first, "a");
  EXPECT_EQ(weights_checksum(back), weights_checksum(weights));

  const std::string junk = (dir / "junk.pt").string();
  std::ofstream(junk) << "not a zip";
  try {
    read_exported_weights(junk);
    ADD_FAILURE() << "read a file that is not an archive";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(junk), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardscope
