// Pipeline schedules against their definitions: GPipe and 1F1B orders, how many micro-batches'
// activations each stage holds, every schedule's passes and placement, and the bubble of an ideal
// pipeline against each schedule's formula. (The multi-stage orders are checked against PyTorch's
// in pipeline_orders_test.cpp.)
#include "strategies/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace shardscope::pipeline {
namespace {

TEST(PipelineSchedule, GPipeRunsEveryForwardThenEveryBackward) {
  const auto actions = schedule("gpipe", 1, 4, 3);
  const std::vector<Action> expected = {{Pass::kForward, 0, 1},  {Pass::kForward, 1, 1},
                                        {Pass::kForward, 2, 1},  {Pass::kBackward, 0, 1},
                                        {Pass::kBackward, 1, 1}, {Pass::kBackward, 2, 1}};
  EXPECT_EQ(actions, expected);
}

TEST(PipelineSchedule, OneForwardOneBackwardAfterWarmUp) {
  // Stage 1 of 4 warms up with 2 forwards, then alternates, then drains.
  const auto actions = schedule("1f1b", 1, 4, 5);
  const std::vector<Action> expected = {{Pass::kForward, 0, 1},  {Pass::kForward, 1, 1},
                                        {Pass::kForward, 2, 1},  {Pass::kBackward, 0, 1},
                                        {Pass::kForward, 3, 1},  {Pass::kBackward, 1, 1},
                                        {Pass::kForward, 4, 1},  {Pass::kBackward, 2, 1},
                                        {Pass::kBackward, 3, 1}, {Pass::kBackward, 4, 1}};
  EXPECT_EQ(actions, expected);
  // The last stage never waits: forward, then at once its backward.
  const auto last = schedule("1f1b", 3, 4, 2);
  const std::vector<Action> alternating = {{Pass::kForward, 0, 3},
                                           {Pass::kBackward, 0, 3},
                                           {Pass::kForward, 1, 3},
                                           {Pass::kBackward, 1, 3}};
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

struct Shape {
  const char* kind;
  int p, v, m;
};

TEST(PipelineSchedule, EveryStageRunsEachMicroBatchOnceEachWayOnItsRank) {
  const std::vector<Shape> shapes = {{"gpipe", 4, 1, 8},
                                     {"1f1b", 4, 1, 8},
                                     {"interleaved-1f1b", 4, 2, 8},
                                     {"interleaved-1f1b", 3, 3, 6},
                                     {"interleaved-1f1b", 4, 2, 3},
                                     {"zero-bubble", 4, 2, 8},
                                     {"zero-bubble", 2, 4, 4},
                                     {"zbv", 4, 2, 8},
                                     {"zbv", 4, 2, 3},
                                     {"dualpipev", 4, 2, 8},
                                     {"dualpipev", 3, 2, 9}};
  for (const Shape& c : shapes) {
    // (stage, micro-batch) -> its passes in order: forward, then a whole backward or an input
    // and a weight pass.
    std::map<std::pair<int, int>, std::string> seen;
    for (int r = 0; r < c.p; ++r) {
      const auto held = rank_stages(c.kind, r, c.p, c.v);
      ASSERT_EQ(held.size(), static_cast<size_t>(c.v)) << c.kind;
      for (int s : held) EXPECT_EQ(stage_rank(c.kind, s, c.p, c.v), r) << c.kind << " " << s;
      for (const auto& a : schedule(c.kind, r, c.p, c.m, c.v)) {
        ASSERT_NE(std::find(held.begin(), held.end(), a.stage), held.end()) << c.kind;
        seen[{a.stage, a.micro}] += "FBIW"[static_cast<int>(a.pass)];
      }
    }
    ASSERT_EQ(seen.size(), static_cast<size_t>(c.p * c.v * c.m)) << c.kind;
    for (const auto& [key, passes] : seen) {
      EXPECT_TRUE(passes == "FB" || passes == "FIW")
          << c.kind << " stage " << key.first << " micro-batch " << key.second << ": " << passes;
    }
  }
  // The V puts the first and the last stage on rank 0; the loop puts stage r + k p on rank r.
  EXPECT_EQ(rank_stages("zbv", 1, 4, 2), (std::vector<int>{1, 6}));
  EXPECT_EQ(rank_stages("interleaved-1f1b", 1, 4, 3), (std::vector<int>{1, 5, 9}));
}

TEST(PipelineSchedule, IdealBubbleIsEachSchedulesFormula) {
  for (const char* kind : {"gpipe", "1f1b"}) {
    for (int p : {1, 2, 4}) {
      for (int m : {1, 4, 8}) {
        for (double weight : {0.0, 1.0}) {  // backward as long as forward, or twice
          EXPECT_NEAR(simulated_bubble(kind, p, m, 1, {1.0, 1.0, weight}),
                      bubble_formula(kind, p, m), 1e-12)
              << kind << " p " << p << " m " << m << " weight " << weight;
        }
      }
    }
  }
  EXPECT_DOUBLE_EQ(bubble_formula("1f1b", 4, 8), 3.0 / 11.0);
  // Interleaving v stages shrinks the bubble v-fold: (p-1)/(v m + p-1), whatever the passes cost.
  for (const Shape& c : {Shape{"interleaved-1f1b", 2, 2, 4}, Shape{"interleaved-1f1b", 4, 2, 8},
                         Shape{"interleaved-1f1b", 3, 2, 6}, Shape{"interleaved-1f1b", 4, 4, 8}}) {
    for (double weight : {0.0, 1.0}) {
      EXPECT_NEAR(simulated_bubble(c.kind, c.p, c.m, c.v, {1.0, 1.0, weight}),
                  bubble_formula(c.kind, c.p, c.m, c.v), 1e-12)
          << c.kind << " p " << c.p << " v " << c.v << " m " << c.m;
    }
  }
  EXPECT_DOUBLE_EQ(bubble_formula("interleaved-1f1b", 4, 8, 2), 3.0 / 19.0);
  // Zero-bubble (ZB-H1, interleaved): (p-1)(F + B - W) idle where 1F1B idles (p-1)(F + B + W),
  // so (p-1)/(3 v m + p-1) with equal passes.
  for (const Shape& c : {Shape{"zero-bubble", 2, 2, 4}, Shape{"zero-bubble", 4, 2, 8},
                         Shape{"zero-bubble", 3, 2, 6}, Shape{"zero-bubble", 2, 4, 4}}) {
    const double bubble = simulated_bubble(c.kind, c.p, c.m, c.v);
    EXPECT_NEAR(bubble, bubble_formula(c.kind, c.p, c.m, c.v), 1e-12) << c.p << " " << c.v;
    EXPECT_LT(bubble, simulated_bubble("interleaved-1f1b", c.p, c.m, c.v));
  }
  // ZB-V and DualPipeV as PyTorch orders them: no more idle than zero-bubble's; their papers'
  // zero needs the steady state their warm-up here does not fully reach.
  for (const char* kind : {"zbv", "dualpipev"}) {
    for (const Shape& c : {Shape{kind, 2, 2, 4}, Shape{kind, 4, 2, 8}, Shape{kind, 3, 2, 6}}) {
      EXPECT_LE(simulated_bubble(kind, c.p, c.m, 2),
                bubble_formula("zero-bubble", c.p, c.m, 2) + 1e-12)
          << kind << " p " << c.p;
    }
  }
}

TEST(PipelineSchedule, ActivationCountsFollowTheSchedule) {
  for (int r = 0; r < 4; ++r) {
    // Interleaved 1F1B warms up with (v-1) rounds plus two passes per hop to the last rank.
    EXPECT_EQ(peak_in_flight(schedule("interleaved-1f1b", r, 4, 8, 2)), 4 + 2 * (3 - r) + 1);
    // Zero-bubble warms up with one pass per hop but frees a micro-batch only at its weight
    // pass, r of which rank r defers: v p on every rank.
    EXPECT_EQ(peak_in_flight(schedule("zero-bubble", r, 4, 8, 2)), 2 * 4);
    // ZB-V: 2p stage-halves' activations on every rank, 1F1B's memory in full stages.
    EXPECT_EQ(peak_in_flight(schedule("zbv", r, 4, 8, 2)), 2 * 4);
  }
}

TEST(PipelineSchedule, RejectsNonsense) {
  EXPECT_THROW(schedule("zigzag", 0, 2, 2), std::invalid_argument);
  EXPECT_THROW(schedule("1f1b", 2, 2, 2), std::invalid_argument);
  EXPECT_THROW(schedule("1f1b", 0, 2, 0), std::invalid_argument);
  EXPECT_THROW(schedule("1f1b", 0, 2, 2, 2), std::invalid_argument);
  EXPECT_THROW(schedule("zbv", 0, 2, 4, 3), std::invalid_argument);
  EXPECT_THROW(schedule("dualpipev", 0, 2, 3, 2), std::invalid_argument);
  EXPECT_THROW(schedule("interleaved-1f1b", 0, 4, 9, 2), std::invalid_argument);  // 2 rounds
}

}  // namespace
}  // namespace shardscope::pipeline
