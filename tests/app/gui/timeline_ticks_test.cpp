#include "app/gui/timeline_ticks.h"

#include <gtest/gtest.h>

#include "app/gui/timeline_figures.h"
#include "tests/support/pipeline_trace.h"

namespace shardscope::gui {
namespace {

std::vector<StepSpan> uniform_steps(int count, int first, int64_t period_ns) {
  std::vector<StepSpan> steps;
  for (int k = 0; k < count; ++k)
    steps.push_back({first + k, k * period_ns, k * period_ns + period_ns * 9 / 10});
  return steps;
}

TEST(TimelineTicks, NeighbouringTicksReadDifferentlyAtEveryZoomUpToTheClosest) {
  // Far into a long run (221.324 s), from the closest zoom out to minutes per tick.
  const double t = 221.324e9;
  for (double ns_per_px = kMinNsPerPx; ns_per_px < 1e10; ns_per_px *= 3) {
    const double step = tick_step_ns(ns_per_px, 110);
    ASSERT_GE(step, 1.0);  // whole nanoseconds
    const double first = std::ceil(t / step) * step;
    for (int k = 0; k < 3; ++k) {
      EXPECT_NE(tick_label(first + k * step, step), tick_label(first + (k + 1) * step, step))
          << "at " << ns_per_px << " ns/px, tick step " << step << " ns";
    }
  }
  // The old axis read "221.324 s" twice at close zoom.
  EXPECT_EQ(tick_label(221.324e9 + 200, 200), "221.3240002 s");
  EXPECT_EQ(tick_label(1.5e6, 5e5), "1.5 ms");
  EXPECT_EQ(tick_label(0, 100), "0 ns");
}

TEST(TimelineTicks, StepMarkersThinToANiceStrideWhenZoomedOut) {
  // 25 000 steps of 1 ms on 1 500 pixels: a marker per step would be a solid curtain.
  const auto steps = uniform_steps(25000, 0, 1000000);
  const double ns_per_px = 25000.0 * 1e6 / 1500;
  const int stride = step_stride(steps, ns_per_px, 8);
  EXPECT_EQ(stride, 200);  // the nice number that leaves at least 8 px: 133.3 steps needed
  int drawn = 0;
  for (const auto& s : steps) drawn += s.step % stride == 0;
  EXPECT_LE(drawn, 1500 / 8 + 1);
  EXPECT_GT(drawn, 1500 / 8 / 5);  // thinned, not emptied
  // Labels are sparser still; zoomed in, every step gets its marker.
  EXPECT_GT(step_stride(steps, ns_per_px, 70), stride);
  EXPECT_EQ(step_stride(steps, 1e6 / 50, 8), 1);
  EXPECT_EQ(step_stride(uniform_steps(1, 0, 1000), 1e9, 8), 1);
}

TEST(TimelineTicks, ALabelCutAtTheLeftEdgeGoesToTheVisibleStart) {
  double x = -1;
  ASSERT_TRUE(label_x(-500, 300, 1000, 40, &x));
  EXPECT_EQ(x, 3);  // at the edge, not at -497 where nobody sees it
  ASSERT_TRUE(label_x(100, 300, 1000, 40, &x));
  EXPECT_EQ(x, 103);
  EXPECT_FALSE(label_x(-500, 20, 1000, 40, &x));  // 20 px visible: no room
  EXPECT_FALSE(label_x(980, 1200, 1000, 40, &x));
}

TEST(TimelineTicks, FindStepByItsOwnNumberOrTheNearest) {
  const auto steps = uniform_steps(3, 3, 1000);  // a run resumed at step 3: 3, 4, 5
  ASSERT_NE(find_step(steps, 4), nullptr);
  EXPECT_EQ(find_step(steps, 4)->step, 4);
  EXPECT_EQ(find_step(steps, 0)->step, 3);
  EXPECT_EQ(find_step(steps, 99)->step, 5);
  EXPECT_EQ(find_step({}, 1), nullptr);
}

TEST(TimelineTicks, MemoryHeldAtATimeIsTheLastSampleBeforeIt) {
  const std::vector<std::pair<int64_t, int64_t>> samples = {{10, 100}, {20, 300}, {30, 50}};
  EXPECT_EQ(held_at(samples, 5), -1);
  EXPECT_EQ(held_at(samples, 10), 100);
  EXPECT_EQ(held_at(samples, 25), 300);
  EXPECT_EQ(held_at(samples, 1000), 50);
  EXPECT_EQ(format_bytes(12.3e6), "12.30 MB");
}

TEST(TimelineIndexSteps, ResumedRunKeepsItsStepNumbersAndAStepSpansEveryRank) {
  // A pipeline resumed at step 3: the last stage starts its part later and rank 0 ends later,
  // so a step's span is the union of every rank's.
  const profiling::Trace t = test::gpipe_trace(4, 8, 3, 3);
  const TimelineIndex index = build_timeline_index(t);
  ASSERT_EQ(index.steps.size(), 3u);
  EXPECT_EQ(index.steps.front().step, 3);
  EXPECT_EQ(index.steps.back().step, 5);
  for (const auto& s : index.steps) {
    for (const auto& rank : t.ranks) {
      for (const auto& e : rank.events) {
        if (e.step != s.step) continue;
        EXPECT_LE(s.t0_ns, e.t0_ns);
        EXPECT_GE(s.t1_ns, e.t1_ns);
      }
    }
  }
  // The figures drawn per rank and step are the profiling ones: a 3/11 bubble on each stage.
  ASSERT_EQ(index.step_figures.size(), 4u);
  ASSERT_EQ(index.step_figures[2].size(), 3u);
  EXPECT_EQ(index.step_figures[2][0].step, 3);
  EXPECT_NEAR(index.step_figures[2][1].bubble_fraction(), 3.0 / 11.0, 1e-12);
  EXPECT_EQ(step_figures_text(index.step_figures[2][1], 3.0 / 11.0, false),
            "bubble 27.3 % (formula 27.3 %), no communication");
}

TEST(TimelineFigures, StepTextSaysOverlapAndExposedCommunication) {
  profiling::StepMetrics m;
  m.comm_ns = 4000000;
  m.overlap_ns = 1000000;
  m.exposed_comm_ns = 3000000;
  EXPECT_EQ(step_figures_text(m, -1, false), "overlap 25 %, exposed comm 3.000 ms");
  EXPECT_EQ(step_figures_text(m, -1, true), "25 % | 3.00 ms");
}

// A live run's last step has recorded no communication yet: "no communication" would be false.
TEST(TimelineFigures, AStepInProgressSaysSoNotNoCommunication) {
  profiling::StepMetrics m;  // nothing recorded yet
  EXPECT_EQ(step_figures_text(m, -1, false), "no communication");
  EXPECT_EQ(step_figures_text(m, -1, false, true), "step in progress");
  EXPECT_EQ(step_figures_text(m, 3.0 / 11.0, true, true), "running");
}

}  // namespace
}  // namespace shardscope::gui
