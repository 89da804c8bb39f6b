#pragma once

#include <vector>

#include "profiling/metrics/trace_metrics.h"
#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// The figures a reader takes from a run, per rank: one place for the timeline, `report` and
// `project`, so that they never disagree. Medians over the rank's steps, leaving out its first
// step (warm-up, one-off set-up) when there are others; a resumed run's first step is its first
// after the resume, which pays the same set-up.
struct RankFigures {
  int rank = 0;
  int steps = 0;               // how many steps the medians are over
  double step_s = 0;           // the step's span: first event's start to last event's end
  double exposed_comm_s = 0;   // communication no compute hides, less peer_wait_s
  double peer_wait_s = 0;      // sends and receives waiting for a neighbour stage (the bubble's)
  double overlap = 0;          // |compute ∩ communication| / |communication|, 0 without any
  double bubble_fraction = 0;  // idle share of the pipeline window (StepMetrics::bubble_fraction)
};
struct RunFigures {
  double step_s = 0;  // the slowest rank's median step: what the run waits for
  std::vector<RankFigures> ranks;
};
RunFigures run_figures(const Trace& trace);
// The same from per-step metrics already computed (step_metrics(trace)); `skip_first`: leave
// out each rank's first step (first_step_is_warm_up).
RunFigures run_figures(const std::vector<StepMetrics>& steps, bool skip_first = true);

// Per rank (index into Trace::ranks): the time within each step's pipeline window that the rank
// does not compute, merged. Where a pipeline's stages wait for each other, this is the bubble.
std::vector<Intervals> pipeline_idle(const Trace& trace);

}  // namespace shardscope::profiling
