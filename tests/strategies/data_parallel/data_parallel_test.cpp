// Hand-made data parallelism (ddp_flat, ddp_bucketed with and without overlap) trains exactly
// like one device, communicates each gradient exactly once per step, and only on the last
// accumulation micro-batch.
#include <gtest/gtest.h>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

using test::expect_matches_reference;
using test::tiny_config;

struct Layout {
  std::string strategy;
  bool overlap;
  int world;
  int accum;
};

void PrintTo(const Layout& l, std::ostream* os) {
  *os << l.strategy << (l.overlap ? "" : " no-overlap") << ", world " << l.world << ", accum "
      << l.accum;
}

Config layout_config(const Layout& l) {
  Config c = tiny_config(l.strategy, l.world, l.accum);
  c.strategy_options.overlap = l.overlap;
  c.strategy_options.bucket_mb = 0.1;  // several buckets on the tiny model
  return c;
}

class DataParallelMatchesReference : public testing::TestWithParam<Layout> {};

TEST_P(DataParallelMatchesReference, AfterFiveAdamWSteps) {
  expect_matches_reference(run_training(layout_config(GetParam())));
}

TEST_P(DataParallelMatchesReference, WithPlainSgdWhichShowsAnyGradientScaleError) {
  Config c = layout_config(GetParam());
  c.optimizer.name = "sgd";
  c.optimizer.lr = 0.5;
  c.optimizer.weight_decay = 0.0;
  expect_matches_reference(run_training(c));
}

TEST_P(DataParallelMatchesReference, EveryGradientIsReducedOncePerStep) {
  const Config config = layout_config(GetParam());
  RunSummary s = run_training(config);
  ASSERT_TRUE(s.ok) << s.failure;
  int64_t gradient_bytes = 0;
  for (const auto& [name, w] : s.weights) gradient_bytes += w.numel() * w.element_size();
  for (const auto& rank : s.ranks) {
    auto steps = test::traffic_per_step(rank);
    ASSERT_EQ(steps.size(), size_t(config.steps));
    for (const auto& step : steps) EXPECT_EQ(step.all_reduce_bytes, gradient_bytes);
    if (GetParam().strategy == "ddp_flat") {
      EXPECT_EQ(steps[0].all_reduces, static_cast<int>(s.weights.size()));  // one per parameter
    } else {
      EXPECT_GT(steps[0].all_reduces, 1);
      EXPECT_LT(steps[0].all_reduces, static_cast<int>(s.weights.size()));
    }
  }
}

std::vector<Layout> layouts() {
  std::vector<Layout> out;
  for (int world : {2, 4}) {
    for (int accum : {1, 2}) {
      out.push_back({"ddp_flat", true, world, accum});
      out.push_back({"ddp_bucketed", true, world, accum});
      out.push_back({"ddp_bucketed", false, world, accum});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, DataParallelMatchesReference, testing::ValuesIn(layouts()),
                         [](const auto& info) {
                           const Layout& l = info.param;
                           return l.strategy + (l.overlap ? "" : "_no_overlap") + "_world" +
                                  std::to_string(l.world) + "_accum" + std::to_string(l.accum);
                         });

class DataParallelToyModels : public testing::TestWithParam<std::string> {};

TEST_P(DataParallelToyModels, FrozenTiedAndUnusedParameters) {
  test::expect_toy_models_match_reference(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Strategies, DataParallelToyModels,
                         testing::Values("ddp_flat", "ddp_bucketed"));

TEST(DdpBucketed, OverlapDecidesWhenBucketsStartNotWhatTheyCarry) {
  Config on = layout_config({"ddp_bucketed", true, 2, 1});
  Config off = layout_config({"ddp_bucketed", false, 2, 1});
  RunSummary a = run_training(on), b = run_training(off);
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_EQ(test::traffic_per_step(a.ranks[0]), test::traffic_per_step(b.ranks[0]));
  // Same arithmetic in the same order: the weights are bitwise equal.
  EXPECT_EQ(a.ranks[0].checksum, b.ranks[0].checksum);
}

TEST(DdpBucketed, ReportsItsBucketsAsCommunicationBuffers) {
  RunSummary s = run_training(layout_config({"ddp_bucketed", true, 2, 1}));
  ASSERT_TRUE(s.ok);
  EXPECT_EQ(s.ranks[0].memory.comm_buffers, s.ranks[0].memory.gradients);
}

}  // namespace
}  // namespace shardscope
