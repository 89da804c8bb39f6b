// A rank that runs out of memory is reported as such, with what it held at that moment. On the
// CPU a device's capacity is simulated per rank (--memory-limit-mb).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

TEST(OutOfMemory, ARankPastItsCapacityFailsWithItsMemoryBreakdown) {
  Config config = test::tiny_config("ddp_bucketed", 2, 1);
  config.reference = false;
  config.memory_limit_mb = 2;  // tiny's ranks hold about 3.7 MB at their peak
  const RunSummary s = run_training(config);
  ASSERT_FALSE(s.ok);
  using testing::HasSubstr;
  EXPECT_THAT(s.failure, HasSubstr("out of memory on cpu"));
  EXPECT_THAT(s.failure, HasSubstr("--memory-limit-mb"));
  EXPECT_THAT(s.failure, HasSubstr("parameters"));
  EXPECT_THAT(s.failure, HasSubstr("optimizer_state"));
  EXPECT_THAT(s.failure, HasSubstr("activations"));
  EXPECT_THAT(s.failure, HasSubstr("temporaries"));
  // What it held is what it held when the allocation was refused, not after unwinding.
  const size_t in_use = s.failure.find(" with ") + 6;
  const double bytes_in_use = std::stod(s.failure.substr(in_use));
  const size_t held = s.failure.find(" held ") + 6;
  EXPECT_NEAR(std::stod(s.failure.substr(held)), bytes_in_use / 1e6, 0.01);
  // What was recorded up to then is kept, the failed rank marked.
  ASSERT_EQ(s.trace.ranks.size(), 2u);
  bool marked = false;
  for (const auto& r : s.trace.ranks)
    marked |= r.failure.find("out of memory") != std::string::npos;
  EXPECT_TRUE(marked);
  EXPECT_GT(s.trace.event_count(), 0u);
}

TEST(OutOfMemory, ACapacityAboveThePeakChangesNothing) {
  Config config = test::tiny_config("ddp_bucketed", 2, 1);
  config.memory_limit_mb = 100;
  const RunSummary s = run_training(config);
  ASSERT_TRUE(s.ok) << s.failure;
  test::expect_matches_reference(s);
  for (const auto& r : s.ranks) EXPECT_LT(r.peak_allocated_bytes, int64_t{100'000'000});
}

}  // namespace
}  // namespace shardscope
