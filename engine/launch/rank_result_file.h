#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include <vector>

#include "engine/launch/launcher.h"
#include "engine/train/trainer.h"
#include "profiling/record/device_tracer.h"

namespace shardscope {

// What a rank process hands back to its launcher: its result (when it finished), its failure
// (when it did not), its peak allocated bytes and everything its event log recorded.
struct RankOutcome {
  std::optional<RankResult> result;
  std::optional<RankFailure> failure;
  int64_t peak_allocated_bytes = 0;
  // On a GPU, the kernels, copies and runtime calls this process's CUPTI recorded (each rank
  // process traces its own: CUPTI sees only its own process).
  std::vector<profiling::DeviceActivity> device_activity;
  // Non-empty: written while the rank process was still running, and why (one of the two
  // below). The process's own end overwrites it.
  std::string partial;
};
constexpr const char* kPartialSnapshot = "snapshot";          // taken every second or so
constexpr const char* kPartialAskedToStop = "asked to stop";  // the launcher's SIGTERM

// A step's record as JSON and back (also how rank 0's progress travels through the store).
nlohmann::json step_record_json(const StepRecord& record);
StepRecord step_record_of(const nlohmann::json& json);

// Writes `dir`/rank-R.json (and rank-R.weights with the full weights); the JSON is written
// last and atomically, so its presence means the whole outcome is there.
void write_rank_outcome(const std::string& dir, int rank, const RankOutcome& outcome,
                        const profiling::RankEventLog& log);
// The same, unless `dir`/rank-R.json is already there: a worker that never joined its job (a
// stray duplicate started after the job ended, one that never reached the store) is not that
// rank, and must not write its failure over the outcome the rank left. False when it kept it.
bool write_rank_outcome_unless_present(const std::string& dir, int rank, const RankOutcome& outcome,
                                       const profiling::RankEventLog& log);
// Where rank R's outcome is written in `dir`.
std::string rank_outcome_path(const std::string& dir, int rank);
// Reads it back into `outcome` and `log`; false when the rank left no (complete) file.
bool read_rank_outcome(const std::string& dir, int rank, RankOutcome& outcome,
                       profiling::RankEventLog& log);

}  // namespace shardscope
