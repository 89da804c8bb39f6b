// The Launch tab's queue of runs: closing the app stops the run in progress after its step, and
// leaves nothing behind that would stop a later training in the same process.
#include "app/gui/launch_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/launch/stop_request.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope::gui {
namespace {

Config tiny_run(int steps) {
  Config c = test::tiny_config("ddp_bucketed", 2, 1);
  c.steps = steps;
  c.reference = false;
  finalize(c);
  return c;
}

// The stop request is process-wide. The queue's destructor used to set it whether or not a run
// was going, and nothing cleared it: every training after a closed app ran one step
// (MemoryBreakdown's tests then measured one-step runs when a GUI test had run before them).
TEST(LaunchQueue, ClosingAnIdleQueueLeavesNoStopRequest) {
  ASSERT_EQ(stop_requested(), 0);
  { LaunchQueue idle; }
  EXPECT_EQ(stop_requested(), 0);
  const RunSummary after = run_training(tiny_run(3));
  ASSERT_TRUE(after.ok) << after.failure;
  EXPECT_EQ(after.steps.size(), 3u);
}

TEST(LaunchQueue, ClosingDuringARunStopsItAfterItsStepAndLeavesNoStopRequest) {
  ASSERT_EQ(stop_requested(), 0);
  {
    LaunchQueue queue;
    queue.enqueue(tiny_run(100000), "long");
    // Closing once the run has started: its ranks stop at the end of the step they are in.
    for (int i = 0; i < 2000; ++i) {
      const auto progress = queue.progress();
      if (!progress.empty() && progress.front().status == "running" && progress.front().step > 0)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  EXPECT_EQ(stop_requested(), 0);
  const RunSummary after = run_training(tiny_run(3));
  ASSERT_TRUE(after.ok) << after.failure;
  EXPECT_EQ(after.steps.size(), 3u);
}

}  // namespace
}  // namespace shardscope::gui
