// Pipeline schedules against their definitions: GPipe and 1F1B orders, how many micro-batches'
// activations each stage holds, and the bubble of an ideal pipeline against (p-1)/(m+p-1).
#include "strategies/pipeline_schedule.h"

#include <gtest/gtest.h>

namespace shardscope::pipeline {
namespace {

TEST(PipelineSchedule, GPipeRunsEveryForwardThenEveryBackward) {
  const auto actions = schedule("gpipe", 1, 4, 3);
  const std::vector<Action> expected = {{Pass::kForward, 0},  {Pass::kForward, 1},
                                        {Pass::kForward, 2},  {Pass::kBackward, 0},
                                        {Pass::kBackward, 1}, {Pass::kBackward, 2}};
  EXPECT_EQ(actions, expected);
}

TEST(PipelineSchedule, OneForwardOneBackwardAfterWarmUp) {
  // Stage 1 of 4 warms up with 2 forwards, then alternates, then drains.
  const auto actions = schedule("1f1b", 1, 4, 5);
  const std::vector<Action> expected = {
      {Pass::kForward, 0},  {Pass::kForward, 1},  {Pass::kForward, 2}, {Pass::kBackward, 0},
      {Pass::kForward, 3},  {Pass::kBackward, 1}, {Pass::kForward, 4}, {Pass::kBackward, 2},
      {Pass::kBackward, 3}, {Pass::kBackward, 4}};
  EXPECT_EQ(actions, expected);
  // The last stage never waits: forward, then at once its backward.
  const auto last = schedule("1f1b", 3, 4, 2);
  const std::vector<Action> alternating = {
      {Pass::kForward, 0}, {Pass::kBackward, 0}, {Pass::kForward, 1}, {Pass::kBackward, 1}};
  EXPECT_EQ(last, alternating);
}

TEST(PipelineSchedule, OneFOneBHoldsAtMostStagesMicroBatchesGPipeAllOfThem) {
  for (int p : {2, 4}) {
    for (int m : {1, 4, 8}) {
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(peak_in_flight(schedule("gpipe", s, p, m)), m);
        EXPECT_EQ(peak_in_flight(schedule("1f1b", s, p, m)), std::min(p - s, m))
            << "stage " << s << " of " << p << ", m " << m;
      }
    }
  }
}

TEST(PipelineSchedule, EveryMicroBatchRunsOnceEachWay) {
  for (const char* kind : {"gpipe", "1f1b"}) {
    const auto actions = schedule(kind, 0, 4, 8);
    ASSERT_EQ(actions.size(), 16u);
    std::vector<int> forward(8, 0), backward(8, 0);
    for (const auto& a : actions) {
      if (a.pass == Pass::kForward) {
        EXPECT_EQ(backward[a.micro], 0) << "backward before forward";
        ++forward[a.micro];
      } else {
        EXPECT_EQ(forward[a.micro], 1);
        ++backward[a.micro];
      }
    }
    EXPECT_EQ(forward, std::vector<int>(8, 1));
    EXPECT_EQ(backward, std::vector<int>(8, 1));
  }
}

TEST(PipelineSchedule, IdealBubbleIsTheTextbookFraction) {
  for (const char* kind : {"gpipe", "1f1b"}) {
    for (int p : {1, 2, 4}) {
      for (int m : {1, 4, 8}) {
        for (double backward : {1.0, 2.0}) {
          EXPECT_NEAR(simulated_bubble(kind, p, m, 1.0, backward), bubble_formula(p, m), 1e-12)
              << kind << " p " << p << " m " << m << " backward " << backward;
        }
      }
    }
  }
  EXPECT_DOUBLE_EQ(bubble_formula(4, 8), 3.0 / 11.0);
}

TEST(PipelineSchedule, RejectsNonsense) {
  EXPECT_THROW(schedule("zigzag", 0, 2, 2), std::invalid_argument);
  EXPECT_THROW(schedule("1f1b", 2, 2, 2), std::invalid_argument);
  EXPECT_THROW(schedule("1f1b", 0, 2, 0), std::invalid_argument);
}

}  // namespace
}  // namespace shardscope::pipeline
