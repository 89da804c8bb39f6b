#include "app/gui/timeline_index.h"

#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "app/gui/timeline_view.h"
#include "app/perf/synthetic_trace.h"

namespace shardscope::gui {
namespace {

using profiling::Category;
using profiling::Event;

Event span(int64_t t0, int64_t t1, uint8_t lane = profiling::kHostLane) {
  Event e;
  e.t0_ns = t0;
  e.t1_ns = t1;
  e.lane = lane;
  e.category = Category::kForward;
  return e;
}

profiling::Trace one_rank(std::vector<Event> events) {
  profiling::Trace t;
  profiling::RankTrace r;
  r.lanes = {"host", "comm"};
  r.events = std::move(events);
  t.ranks.push_back(r);
  t.normalise();
  return t;
}

TEST(TimelineIndex, NestedSpansGoOneRowDeeperAndRowsNeverOverlap) {
  // A step containing two micro-batches, each with a forward inside; a collective on its lane.
  auto t = one_rank({span(0, 100), span(0, 50), span(5, 40), span(50, 100), span(60, 90),
                     span(10, 70, profiling::kCommLane), span(20, 30, profiling::kCommLane)});
  const TimelineIndex index = build_timeline_index(t);
  ASSERT_EQ(index.rows.size(), 5u);  // host depth 0..2, comm depth 0..1
  EXPECT_EQ(index.rows[0].events.size(), 1u);
  EXPECT_EQ(index.rows[1].events.size(), 2u);
  EXPECT_EQ(index.rows[2].events.size(), 2u);
  EXPECT_EQ(index.rows[3].lane, profiling::kCommLane);
  EXPECT_EQ(index.rows[4].depth, 1);
  const auto& ev = t.ranks[0].events;
  for (const auto& row : index.rows) {
    for (size_t i = 1; i < row.events.size(); ++i) {
      EXPECT_LE(ev[row.events[i - 1]].t1_ns, ev[row.events[i]].t0_ns);
    }
  }
  EXPECT_EQ(index.t_min, 0);
  EXPECT_EQ(index.t_max, 100);
}

// Each event lands in the shallowest row free at its start, as a walk down the rows would put it
// (the walk was quadratic on a lane of overlapping events: issue 33); random lanes of nested,
// overlapping and zero-length spans, against that walk.
TEST(TimelineIndex, EachEventTakesTheShallowestRowFreeAtItsStart) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<Event> events;
    for (int i = 0; i < 300; ++i) {
      const int64_t t0 = static_cast<int64_t>(rng() % 1000);
      events.push_back(span(t0, t0 + static_cast<int64_t>(rng() % (trial % 2 ? 50 : 400))));
    }
    const auto t = one_rank(events);
    const auto& ev = t.ranks[0].events;
    std::vector<uint32_t> order(ev.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      if (ev[a].t0_ns != ev[b].t0_ns) return ev[a].t0_ns < ev[b].t0_ns;
      return ev[a].t1_ns > ev[b].t1_ns;
    });
    std::vector<int64_t> row_end;
    std::vector<int> expected(ev.size());
    for (uint32_t id : order) {
      size_t depth = 0;
      while (depth < row_end.size() && row_end[depth] > ev[id].t0_ns) ++depth;
      if (depth == row_end.size()) row_end.push_back(0);
      row_end[depth] = ev[id].t1_ns;
      expected[id] = static_cast<int>(depth);
    }
    const TimelineIndex index = build_timeline_index(t);
    ASSERT_EQ(index.rows.size(), row_end.size()) << "trial " << trial;
    for (const auto& row : index.rows) {
      for (size_t i = 0; i < row.events.size(); ++i) {
        EXPECT_EQ(expected[row.events[i]], row.depth) << "trial " << trial;
        if (i > 0) {
          EXPECT_LE(ev[row.events[i - 1]].t1_ns, ev[row.events[i]].t0_ns);
        }
      }
    }
  }
}

TEST(TimelineIndex, ExposedCommunicationIsWhatComputeDoesNotCover) {
  Event comm = span(10, 70, profiling::kCommLane);
  comm.category = Category::kCollective;
  auto t = one_rank({span(0, 30), span(50, 60), comm});
  const TimelineIndex index = build_timeline_index(t);
  ASSERT_EQ(index.exposed_comm.size(), 1u);
  const profiling::Intervals expected = {{30, 50}, {60, 70}};
  EXPECT_EQ(index.exposed_comm[0], expected);
}

// Every event that overlaps the window is drawn exactly once: as a mark of its own, or inside
// exactly one fold of small events whose pixels cover it; wide events are never folded.
void expect_covers_visible(const profiling::RankTrace& rank, const TimelineRow& row,
                           const TimeWindow& w, double width, double fold_px) {
  std::vector<TimelineMark> marks;
  layout_row(rank, row, w, width, fold_px, &marks);
  const auto& ev = rank.events;
  std::vector<uint32_t> visible;
  for (uint32_t id : row.events) {
    if (ev[id].t1_ns > w.t0_ns && ev[id].t0_ns < w.t_of(width)) visible.push_back(id);
  }
  size_t covered = 0;
  size_t next = 0;
  for (const auto& m : marks) {
    ASSERT_LT(next, visible.size());
    EXPECT_EQ(m.event, visible[next]);
    if (m.count == 1) {
      // The event itself, small or not.
      const Event& e = ev[visible[next]];
      EXPECT_DOUBLE_EQ(m.x0, w.x_of(e.t0_ns));
      EXPECT_DOUBLE_EQ(m.x1, w.x_of(e.t1_ns));
    } else {
      for (uint32_t k = 0; k < m.count; ++k) {
        const Event& e = ev[visible[next + k]];
        EXPECT_LT(w.x_of(e.t1_ns) - w.x_of(e.t0_ns), fold_px * 1.0000001 + 1e-9);
        EXPECT_GE(w.x_of(e.t0_ns), m.x0 - 1e-6);
        EXPECT_LE(w.x_of(e.t1_ns), m.x1 + 1e-6);
      }
    }
    next += m.count;
    covered += m.count;
  }
  EXPECT_EQ(covered, visible.size());
}

TEST(TimelineIndex, LayoutCoversEveryVisibleEventOnceAtEveryZoom) {
  std::mt19937 rng(7);
  std::vector<Event> events;
  int64_t t = 0;
  for (int i = 0; i < 5000; ++i) {
    t += rng() % 50;
    const int64_t len = (i % 97 == 0) ? 5000 : 1 + rng() % 40;
    events.push_back(span(t, t + len));
    t += len;
  }
  auto trace = one_rank(events);
  const TimelineIndex index = build_timeline_index(trace);
  ASSERT_EQ(index.rows.size(), 1u);
  for (double ns_per_px : {0.5, 5.0, 50.0, 500.0, 5000.0}) {
    for (int64_t start : {int64_t{-100}, int64_t{1234}, t / 2}) {
      expect_covers_visible(trace.ranks[0], index.rows[0], TimeWindow{start, ns_per_px}, 1200, 3);
    }
  }
}

TEST(TimelineIndex, FoldingBoundsTheMarksByPixelsNotEvents) {
  const profiling::Trace trace = perf::synthetic_trace(200'000);
  const TimelineIndex index = build_timeline_index(trace);
  const double width = 1500;
  TimeWindow all{index.t_min, double(index.t_max - index.t_min) / width};
  std::vector<TimelineMark> marks;
  size_t total = 0, events = 0;
  for (const auto& row : index.rows) {
    layout_row(trace.ranks[row.rank], row, all, width, 3, &marks);
    total += marks.size();
    events += row.events.size();
  }
  EXPECT_EQ(events, trace.event_count());
  // Zoomed out, the steps (one row per rank) are wide; the rest folds to at most a mark per
  // fold width of pixels.
  EXPECT_LE(total, index.rows.size() * (width / 3 + 2) + index.steps.size() * 8);
  EXPECT_LT(total, events / 20);
  // Zoomed in to 10 us, every event is its own mark.
  TimeWindow close{index.t_min + 5'000'000, 10'000.0 / width};
  layout_row(trace.ranks[0], index.rows[1], close, width, 3, &marks);
  ASSERT_FALSE(marks.empty());
  for (const auto& m : marks) EXPECT_EQ(m.count, 1u);
}

// A span recorded on a busy machine says how long its thread was off its core; one that was not
// measured says nothing of it.
TEST(TimelineView, DetailsSayHowLongASpanWasOffItsCore) {
  Event measured = span(0, 5'000'000);
  measured.off_cpu_us = 1500;
  const auto t = one_rank({measured, span(6'000'000, 7'000'000)});
  const TimelineIndex index = build_timeline_index(t);
  const auto first = TimelineView::describe(t, index, EventRef{0, 0});
  EXPECT_DOUBLE_EQ(first.at("off_core_ms").get<double>(), 1.5);
  EXPECT_FALSE(TimelineView::describe(t, index, EventRef{0, 1}).contains("off_core_ms"));
}

// A copy says what it moved and how fast, as Kineto's "memory bandwidth (GB/s)" does: 1 MiB in
// 1.344 us is the first device-to-device copy of assets/traces/kineto/gpu-ddp-nccl-w1, which
// Kineto put at 780.19 GB/s. A copy that recorded no size says neither.
TEST(TimelineView, DetailsSayWhatACopyMovedAndHowFast) {
  Event copy = span(0, 1'344);
  copy.category = Category::kMemcpy;
  copy.bytes = 1'048'576;
  Event unsized = span(2'000, 3'000);
  unsized.category = Category::kMemcpy;
  const auto t = one_rank({copy, unsized});
  const TimelineIndex index = build_timeline_index(t);
  const auto d = TimelineView::describe(t, index, EventRef{0, 0});
  EXPECT_EQ(d.at("copied_bytes").get<int64_t>(), 1'048'576);
  EXPECT_NEAR(d.at("copy_gbps").get<double>(), 780.19, 0.01);
  EXPECT_FALSE(TimelineView::describe(t, index, EventRef{0, 1}).contains("copy_gbps"));
}

TEST(TimelineIndex, MemoryStripTakesTheMostHeldInEachColumn) {
  std::vector<std::pair<int64_t, int64_t>> samples = {{0, 10}, {5, 50}, {7, 20}, {25, 5}};
  std::vector<float> px;
  layout_memory(samples, TimeWindow{0, 10.0}, 4, &px);
  ASSERT_EQ(px.size(), 4u);
  EXPECT_FLOAT_EQ(px[0], 50);  // [0,10): 10, 50, 20
  EXPECT_FLOAT_EQ(px[1], 20);  // held from t=7
  EXPECT_FLOAT_EQ(px[2], 20);  // [20,30): 20 until 25, then 5
  EXPECT_FLOAT_EQ(px[3], 5);
  layout_memory(samples, TimeWindow{-20, 10.0}, 2, &px);
  EXPECT_LT(px[0], 0);  // before the first sample: nothing known
}

}  // namespace
}  // namespace shardscope::gui
