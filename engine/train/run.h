#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/model/gpt_model.h"
#include "engine/state/weights.h"
#include "engine/train/config.h"
#include "engine/train/strategy.h"
#include "engine/train/trainer.h"
#include "profiling/trace/comm_event.h"
#include "profiling/trace/trace.h"

namespace shardscope {

struct CheckpointInfo;  // engine/state/checkpoint.h

struct RankSummary {
  int rank = 0;
  std::string checksum;
  double weight_sum = 0.0;
  MemoryBytes memory;
  std::vector<profiling::CommEvent> comm_events;
  int64_t comm_bytes_per_step = 0;   // median over steps of bytes handed to collectives
  int64_t peak_allocated_bytes = 0;  // the most this rank's threads held at once
  // The device caching allocator's peak, where the rank had its process to itself (0: none).
  int64_t device_allocator_peak_bytes = 0;
  BackwardThreadCounts backward_thread;  // where its backward passes ran
  // What was live at that peak, by what each block is (sums to peak_allocated_bytes); all zero
  // when the run was not traced.
  profiling::MemoryCategories peak_breakdown{};
  // The most activations the rank held at once (its memory samples' largest; the peak's
  // breakdown may fall later, once backward freed some).
  int64_t most_activation_bytes = 0;
  // The formula's bytes for this rank (engine/train/memory_formula_hook.h); zero if none is known.
  profiling::MemoryCategories formula_bytes{};
};

struct ReferenceComparison {
  WeightDeviation deviation;
  std::vector<double> losses;  // the reference's loss per step this run trained
  bool within(double tolerance) const { return deviation.rel <= tolerance; }
};

struct RunSummary {
  Config config;
  std::string data;
  int64_t parameters = 0;
  std::vector<StepRecord> steps;
  std::vector<RankSummary> ranks;
  bool replicated = true;
  bool ranks_agree = false;
  double max_rank_delta = 0.0;  // max |w_r - w_0| over ranks and weights
  std::optional<ReferenceComparison> reference;
  bool ok = true;
  int failed_rank = -1;
  std::string failure;   // root cause, then what the other ranks saw
  NamedTensors weights;  // rank 0's full weights
  double wall_s = 0.0;
  // Checkpoints: the folder this run resumed from and its step, the newer folders skipped as
  // not valid (and why), and the folder of the last checkpoint it wrote.
  std::string resumed_from;
  int resumed_step = 0;
  std::vector<std::string> resume_skipped;
  std::string checkpoint;
  int stopped_by_signal = 0;  // a signal stopped training before the last step (no comparison)
  profiling::Trace trace;     // what every rank did, also when the run failed
  // Every rank's every backward ran on a second thread (SHARDSCOPE_BACKWARD_THREAD=1).
  bool backward_thread = false;
  std::string device_tracing;  // on a GPU: "on", or why kernels are not in the trace
};

struct RunCallbacks {
  std::function<void(const StepRecord&)> on_step;
  std::function<void(const std::string&)> on_phase;  // "training", "reference", ...
  // A resumed run, once its checkpoint is found and checked, before any rank starts: the
  // checkpoint, and why any newer folder was skipped.
  std::function<void(const CheckpointInfo&, const std::vector<std::string>& skipped)> on_resume;
  // The training ranks' logs while they run (thread mode; see LaunchSpec::watch_logs).
  std::function<void(const std::vector<const profiling::RankEventLog*>*)> watch_logs;
};

// A single-device reference already trained on the same global batches: `bench` trains one for
// all its runs, and each run compares with it as with its own.
struct TrainedReference {
  NamedTensors weights;
  std::vector<double> losses;  // per step, from step 0
};

// Trains `config` (already finalized) on rank threads, then the single-device reference on the
// same global batches when config.reference is set (or takes `reference`, trained already), and
// compares full weights. ConfigError escapes before any rank starts; a rank failure is reported
// in the summary.
RunSummary run_training(const Config& config, const RunCallbacks& callbacks = {},
                        const TrainedReference* reference = nullptr);

// A run whose rank processes were started by someone else (torchrun, a scheduler: `shardscope
// worker --out DIR`) and left their outcomes in `dir`, summarised as run_training summarises its
// own: across ranks, and against the single-device reference trained here when config.reference
// is set. A rank whose file is missing or unfinished counts as failed; callers that want to
// refuse such a folder check it first.
RunSummary summarise_rank_folder(const Config& config, const std::string& dir,
                                 const RunCallbacks& callbacks = {});

// What a trace says about the run that recorded it: config, strategy, world, mode, device,
// backend, LibTorch version. A finished run adds its result.
profiling::RunRecord run_description(const Config& config);

// What the configuration asks of this machine (a CUDA device); throws ConfigError.
std::string check_environment(Config& config);

// The single-device counterpart of `config`: world 1, strategy `single`, one micro-batch that is
// the whole global batch.
Config reference_config(const Config& config);

// What a run found, as traces and `run --json` record it (without the configuration).
profiling::RunResult run_result(const RunSummary& summary);
// `run --json`'s document: the result with the configuration beside it.
nlohmann::json summary_to_json(const RunSummary& summary);

}  // namespace shardscope
