#pragma once

#include <cstdint>
#include <vector>

#include "profiling/metrics/trace_metrics.h"
#include "profiling/trace/pipeline_pass_names.h"
#include "profiling/trace/trace.h"

namespace shardscope::gui {

// One row of the timeline: events of one rank and lane that do not overlap, sorted by start.
// Nested spans (a step, its micro-batches, their forward passes) go one row deeper, so within a
// row the ends are sorted too and the visible part is found by binary search.
struct TimelineRow {
  int rank = 0;  // index into Trace::ranks
  int lane = 0;
  int depth = 0;
  std::vector<uint32_t> events;  // indices into the rank's events
};

// One step of the run, by its own number (a resumed run's first is not 0): from the earliest
// start of any rank's part of it to the latest end, so fitting it frames every rank.
struct StepSpan {
  int step = 0;
  int64_t t0_ns = 0, t1_ns = 0;
};

// A trace arranged for drawing, built once when it is loaded.
struct TimelineIndex {
  std::vector<TimelineRow> rows;  // by rank, then lane, then depth
  int64_t t_min = 0, t_max = 0;   // extent of every event and counter
  // Every step, by number, for step markers, the step slider and fit-to-step.
  std::vector<StepSpan> steps;
  // Per rank: each step's overlap, exposed communication and bubble
  // (profiling/metrics/trace_metrics.h), by step number.
  std::vector<std::vector<profiling::StepMetrics>> step_figures;
  // Per rank: the time within the steps' pipeline windows that it does not compute, merged.
  std::vector<profiling::Intervals> pipeline_idle;
  // Per rank: memory held over time (allocated bytes, or the sum of the categories where no
  // allocation samples were recorded), sorted by time.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> memory;
  std::vector<int64_t> memory_peak;  // per rank
  // Per rank: communication not hidden behind compute (HTA's exposed communication), less a send
  // or receive's wait for its neighbour stage (the bubble: StepMetrics::peer_wait_ns), merged.
  std::vector<profiling::Intervals> exposed_comm;
  std::vector<bool> rank_failed;  // per rank: it failed or was stopped (RankTrace::failure)
  // By interned name: whether it names a split backward's weight pass, which gets its own colour
  // (the input pass, which the previous stage waits for, keeps backward's).
  std::vector<bool> weight_pass_names;
  // Per string: a pipeline pass's short label and stage (pipeline_pass_names.h), else empty.
  std::vector<profiling::PassLabel> pass_labels;
  bool has_weight_passes = false;
};
TimelineIndex build_timeline_index(const profiling::Trace& trace);

// The visible time range mapped onto pixels.
struct TimeWindow {
  int64_t t0_ns = 0;
  double ns_per_px = 1.0;
  double x_of(int64_t t) const { return (t - t0_ns) / ns_per_px; }
  int64_t t_of(double x) const { return t0_ns + static_cast<int64_t>(x * ns_per_px); }
};

// What to draw for one row: one event, or a run of events each narrower than the fold width
// folded into one mark. A fold jumps over its pixels' events with one binary search (as Tracy
// does), so the cost of a row follows the pixels on screen, not the events in the trace.
struct TimelineMark {
  double x0 = 0, x1 = 0;  // pixels from the window's left edge
  uint32_t event = 0;     // the first event
  uint32_t count = 1;     // more than 1: a fold
};
void layout_row(const profiling::RankTrace& rank, const TimelineRow& row, const TimeWindow& window,
                double width_px, double fold_px, std::vector<TimelineMark>* out);

// The memory strip of a rank: per pixel column, the most held within it.
void layout_memory(const std::vector<std::pair<int64_t, int64_t>>& samples,
                   const TimeWindow& window, double width_px, std::vector<float>* bytes_per_px);

}  // namespace shardscope::gui
