#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiling/trace/trace.h"

namespace shardscope::analysis {

// A pipeline run's shape, as its recorded configuration says: what the bubble is measured
// against.
struct RunPipeline {
  int stages = 1;
  int micro_batches = 1;
  std::string schedule;            // gpipe, 1f1b, interleaved-1f1b, zero-bubble, zbv, dualpipev
  double formula = 0;              // the schedule's bubble, e.g. (p - 1) / (m + p - 1)
  std::vector<int> stage_of_rank;  // by rank: its place along the pipeline's ranks
  // By rank: the (virtual) stages it holds, more than one under the multi-stage schedules.
  std::vector<std::vector<int>> stages_held;
  int stages_per_rank = 1;
};
// Empty for a run without pipeline stages, or a trace whose description names no configuration
// this version can read (another version's, a foreign Chrome trace).
std::optional<RunPipeline> pipeline_of_run(const profiling::RunRecord& run);

// The per-rank figures of profiling/metrics/step_figures.h as `report --json` and `project --json`
// give them: {"step_s": the slowest rank's, "ranks": [{"rank", "steps", "step_s", "exposed_comm_s",
// "overlap", "bubble_fraction"}], "pipeline": {...} or null}. bubble_fraction is null for a run
// without pipeline stages, where idle time is not a bubble.
nlohmann::json figures_json(const profiling::Trace& trace);

// What a pipeline run's passes took: the median of a stage's forward, input pass and weight pass
// over every rank and step (where backward is not split, half of a whole backward each).
struct MeasuredPasses {
  double forward_s = 0, input_s = 0, weight_s = 0;
};
// Empty when the trace holds no pipeline passes.
std::optional<MeasuredPasses> measured_passes(const profiling::Trace& trace);
// The schedule's bubble were every pass to cost what it cost in this run: the papers' formulas
// assume equal forward, input and weight passes, which a real model does not have.
double bubble_with_measured_passes(const RunPipeline& pipeline, const MeasuredPasses& passes);

}  // namespace shardscope::analysis
