#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "profiling/trace/memory_kind.h"

namespace shardscope::profiling {

// What a run was and what it found, as a trace carries it (in the native file, in a Chrome
// trace's otherData.run) and as `run --json` writes it. One struct and one conversion to and
// from JSON (run_record.cpp), so that every reader gets the same defaults: a field a file does
// not have, or has with the wrong type, reads as its default here.

struct RecordedStep {
  int step = 0;
  double loss = 0;  // NaN where the run's loss was not a number (JSON null)
  double step_time_s = 0;
  double lr = 0;
};

// Bytes a rank's strategy holds by what they are for (engine's MemoryBytes).
struct RecordedHoldings {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, comm_buffers = 0, host = 0;
};

struct RecordedRank {
  int rank = 0;
  std::string checksum;
  double weight_sum = 0;
  int64_t comm_calls = 0;
  int64_t comm_bytes_per_step = 0;
  int64_t peak_allocated_bytes = 0;
  // torch.cuda.max_memory_allocated of the rank's own process, where it had one (0: none).
  int64_t device_allocator_peak_bytes = 0;
  // What was live at the peak and what the formula predicts, by category; absent in traces
  // written before runs recorded them.
  std::optional<MemoryCategories> peak_breakdown, formula_bytes;
  RecordedHoldings holdings;
};

// The trained weights against the single-device reference.
struct RecordedReference {
  double max_abs_deviation = 0;
  double rel_deviation = 0;
  std::string worst_parameter;
  double worst_parameter_rel_deviation = 0;
  std::vector<double> losses;  // the reference's loss per step (may be empty)
};

// Per parameter group, how far one rank's (gathered) weights are from rank 0's and from the
// reference's.
struct WeightSyncRow {
  int rank = 0;
  std::vector<double> vs_rank0, vs_reference;  // by group; empty when not measured
};

struct RecordedResume {
  std::string folder;
  int step = 0;
  std::vector<std::string> skipped;  // what the resume left out (checkpoint.h)
};

// What the run found.
struct RunResult {
  std::string data;
  int64_t parameters = 0;
  bool ok = false;
  int failed_rank = -1;  // with `failure`, when !ok
  std::string failure;
  std::vector<RecordedStep> steps;
  std::vector<RecordedRank> ranks;
  bool replicated = true;
  bool ranks_agree = false;
  double max_rank_delta = 0;
  std::optional<RecordedReference> reference;
  std::optional<RecordedResume> resumed_from;
  std::string checkpoint;  // where the run's last checkpoint went, if it wrote one
  int stopped_by_signal = 0;
  double wall_s = 0;
  // Kept in traces only (not in `run --json`): every rank's own losses; per rank whether they
  // are losses (a pipeline stage before the last computes none); tokens routed per expert; the
  // weight-sync grid.
  bool has_rank_detail = false;
  std::vector<std::vector<double>> rank_losses;
  std::vector<bool> reports_loss;
  // A mixture of experts: per rank, per step, the tokens its routers sent to each expert,
  // [layer * experts + expert] (empty without experts).
  std::vector<std::vector<std::vector<int64_t>>> routed_tokens;
  std::vector<std::string> sync_groups;
  std::vector<WeightSyncRow> sync_ranks;
};

// The timing a replayed trace was given (profiling/projection/trace_replay.h).
struct RecordedProjection {
  RecordedProjection() = default;
  RecordedProjection(std::string hardware_name, double scale)
      : hardware(std::move(hardware_name)), compute_scale(scale) {}
  std::string hardware;
  double compute_scale = 0;
  // A projected configuration's pipeline, whose one drawn rank a stage is rank `stage` (none:
  // stages 0 or 1): so the app shades its bubble and gives its formula as for a run's.
  int pipeline_stages = 0, micro_batches = 0, stages_per_rank = 1;
  std::string schedule;
};

// RunRecord::mode of a trace read from the PyTorch profiler's files: its ProfilerStep#N spans are
// the steps the user chose to profile (the profiler's schedule already left out warm-up), so
// every one of them is measured.
inline constexpr const char* kProfilerMode = "pytorch profiler";

struct RunRecord {
  // The configuration as the engine wrote it (engine/train/config.h's JSON), kept as text: only the
  // engine reads it (engine/train/run.h, recorded_config), this layer carries it. Empty when the
  // trace says nothing of how it ran (a foreign trace).
  std::string config_json;
  std::string strategy;
  int world = 0;
  std::string mode, device, backend, torch;
  double device_matmul_tflops = 0;  // the measuring device's matmul rate; 0 when unknown
  // The GPU as a foreign trace names it (a PyTorch profiler trace's deviceProperties: "NVIDIA
  // H200"); empty when unknown.
  std::string device_name;
  // Ranks sharing a GPU let the turn pass on only once the GPU had run the holder's kernels
  // (DeviceTurns::drain_before_release, since 2026-11-27): their kernels did not run time-sliced
  // beside each other's. False for older GPU recordings, and for every other run.
  bool turns_drain_device = false;
  std::optional<RunResult> result;  // empty while a run goes on, or for a foreign trace
  std::optional<RecordedProjection> projected;

  bool has_config() const { return !config_json.empty(); }
  // Whether the record says anything at all ("{}" in a file).
  bool empty() const;
};

// `text` is a run description's JSON; anything else (not JSON, not an object) reads as an empty
// record, since a trace is worth opening without one.
RunRecord run_record_from_json(std::string_view text);
std::string run_record_to_json(const RunRecord& run);

// The same as JSON values, for writers that embed them (profiling/trace/run_record_json.h).

}  // namespace shardscope::profiling
