// A rank process's outcome file carries its own CUPTI record back to the launcher (issue 37 §2:
// CUPTI sees only its own process), and a CPU rank's file, with none, still reads.
#include "engine/launch/rank_result_file.h"

#include <gtest/gtest.h>

#include "profiling/record/rank_event_log.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

TEST(RankResultFile, DeviceActivityTravelsWithTheOutcome) {
  const std::string dir = test::test_temp_dir().string();
  RankOutcome written;
  written.failure = RankFailure{1, "stopped", 42};
  profiling::DeviceActivity kernel;
  kernel.rank = 1;
  kernel.name = "ampere_sgemm_128x64_tn";
  kernel.category = profiling::Category::kKernel;
  kernel.stream = 7;
  kernel.t0_ns = 1000;
  kernel.t1_ns = 5000;
  kernel.correlation = 99;
  profiling::DeviceActivity launch = kernel;
  launch.name = "cudaLaunchKernel";
  launch.category = profiling::Category::kOther;
  launch.t0_ns = 900;
  launch.t1_ns = 950;
  written.device_activity = {kernel, launch};
  profiling::RankEventLog log(1);
  write_rank_outcome(dir, 1, written, log);

  RankOutcome read;
  profiling::RankEventLog read_log(1);
  ASSERT_TRUE(read_rank_outcome(dir, 1, read, read_log));
  ASSERT_EQ(read.device_activity.size(), 2u);
  const profiling::DeviceActivity& k = read.device_activity[0];
  EXPECT_EQ(k.name, kernel.name);
  EXPECT_EQ(k.category, profiling::Category::kKernel);
  EXPECT_EQ(k.stream, 7u);
  EXPECT_EQ(k.t0_ns, 1000);
  EXPECT_EQ(k.t1_ns, 5000);
  EXPECT_EQ(k.correlation, 99u);
  EXPECT_EQ(read.device_activity[1].category, profiling::Category::kOther);

  RankOutcome on_a_cpu;
  on_a_cpu.failure = RankFailure{0, "stopped", 1};
  write_rank_outcome(dir, 0, on_a_cpu, log);
  RankOutcome back;
  ASSERT_TRUE(read_rank_outcome(dir, 0, back, read_log));
  EXPECT_TRUE(back.device_activity.empty());
}

// A rank process's spans come back with how long its thread was off its core in each, so that
// device time takes the same out of a processes run as of a threads run.
TEST(RankResultFile, SpansKeepTheirTimeOffTheCore) {
  const std::string dir = test::test_temp_dir().string();
  profiling::RankEventLog log(0);
  log.restore({},
              {{"forward blocks.0", profiling::Category::kForward, 10, 5'000'000, 0, -1, 1234},
               {"backward blocks.0", profiling::Category::kBackward, 5'000'000, 9'000'000, 0, -1}},
              {});
  RankOutcome outcome;
  outcome.failure = RankFailure{0, "stopped", 1};
  write_rank_outcome(dir, 0, outcome, log);
  RankOutcome read;
  profiling::RankEventLog read_log(0);
  ASSERT_TRUE(read_rank_outcome(dir, 0, read, read_log));
  const auto spans = read_log.spans();
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].off_cpu_us, 1234);
  EXPECT_EQ(spans[1].off_cpu_us, 0);
}

}  // namespace
}  // namespace shardscope
