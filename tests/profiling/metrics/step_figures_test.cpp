#include "profiling/metrics/step_figures.h"

#include <gtest/gtest.h>

#include "tests/support/pipeline_trace.h"

namespace shardscope::profiling {
namespace {

Event event(Trace& t, Category c, int64_t t0, int64_t t1, int step, uint8_t lane = kHostLane) {
  Event e;
  e.name = t.intern(category_name(c));
  e.category = c;
  e.t0_ns = t0;
  e.t1_ns = t1;
  e.lane = lane;
  e.step = step;
  return e;
}

// One rank, steps numbered from 3 (a resumed run), step k lasting `span[k]` with compute over
// its first half and one collective from 40 % to 70 % of it: overlap 1/3, exposed 20 % of it.
RankTrace data_parallel_rank(Trace& t, int rank, const std::vector<int64_t>& span) {
  RankTrace r;
  r.rank = rank;
  r.lanes = {"host", "comm"};
  int64_t origin = 0;
  for (size_t k = 0; k < span.size(); ++k) {
    const int step = 3 + static_cast<int>(k);
    const int64_t s = span[k];
    r.events.push_back(event(t, Category::kStep, origin, origin + s, step));
    r.events.push_back(event(t, Category::kForward, origin, origin + s / 2, step));
    r.events.push_back(
        event(t, Category::kCollective, origin + s * 4 / 10, origin + s * 7 / 10, step, kCommLane));
    origin += s + 100;
  }
  return r;
}

TEST(StepFigures, MediansLeaveOutTheFirstStepAndTheRunWaitsForTheSlowestRank) {
  Trace t;
  // Rank 0's first step (warm-up) is the longest; its later medians are 1000 ns. Rank 1's are
  // 2000 ns, so the run's step is rank 1's.
  t.ranks.push_back(data_parallel_rank(t, 0, {50000, 1000, 1000, 3000}));
  t.ranks.push_back(data_parallel_rank(t, 1, {1000, 2000, 2000, 1000}));
  t.normalise();
  const RunFigures f = run_figures(t);
  ASSERT_EQ(f.ranks.size(), 2u);
  EXPECT_EQ(f.ranks[0].steps, 3);
  EXPECT_DOUBLE_EQ(f.ranks[0].step_s, 1000e-9);
  EXPECT_DOUBLE_EQ(f.ranks[1].step_s, 2000e-9);
  EXPECT_DOUBLE_EQ(f.step_s, 2000e-9);
  // Communication [0.4, 0.7) of the step, compute [0, 0.5): 0.1 hidden of 0.3.
  EXPECT_NEAR(f.ranks[0].overlap, 1.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(f.ranks[0].exposed_comm_s, 200e-9);
  EXPECT_DOUBLE_EQ(f.ranks[1].exposed_comm_s, 400e-9);
}

TEST(StepFigures, UniformGPipeBubbleIsExactlyTheFormula) {
  // 4 stages, 8 micro-batches: (p - 1) / (m + p - 1) = 3 / 11 on every stage.
  const Trace t = test::gpipe_trace(4, 8, 3, 0);
  const RunFigures f = run_figures(t);
  ASSERT_EQ(f.ranks.size(), 4u);
  for (const auto& r : f.ranks) {
    EXPECT_NEAR(r.bubble_fraction, 3.0 / 11.0, 1e-12) << "rank " << r.rank;
    EXPECT_DOUBLE_EQ(r.overlap, 0.0);  // no communication at all
    EXPECT_DOUBLE_EQ(r.exposed_comm_s, 0.0);
  }
  // With more micro-batches the bubble shrinks as the formula does: 3 / 35.
  for (const auto& r : run_figures(test::gpipe_trace(4, 32, 2, 0)).ranks) {
    EXPECT_NEAR(r.bubble_fraction, 3.0 / 35.0, 1e-12);
  }
}

TEST(StepFigures, PipelineIdleIsTheWindowLessTheRanksCompute) {
  const Trace t = test::gpipe_trace(4, 8, 2, 5);
  const auto idle = pipeline_idle(t);
  ASSERT_EQ(idle.size(), 4u);
  const auto windows = pipeline_windows(t);
  ASSERT_EQ(windows.size(), 2u);
  EXPECT_EQ(windows.begin()->first, 5);  // the steps' own numbers
  int64_t window = 0;
  for (const auto& [step, w] : windows) window += w.second - w.first;
  for (size_t r = 0; r < idle.size(); ++r) {
    int64_t length = 0;
    for (const auto& [a, b] : idle[r]) length += b - a;
    EXPECT_EQ(length * 11, window * 3) << "rank " << r;
  }
  // Stage 0 starts at once and waits at the end of the forwards for the last stage's backward:
  // its first idle interval starts after its 8 forwards.
  EXPECT_EQ(idle[0].front().first, 8 * 1000);
  // The last stage waits 3 forwards before its first micro-batch arrives.
  EXPECT_EQ(idle[3].front(), (std::pair<int64_t, int64_t>{0, 3 * 1000}));
}

}  // namespace
}  // namespace shardscope::profiling
