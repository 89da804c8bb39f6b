#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/launch/launcher.h"
#include "engine/train/config.h"
#include "engine/train/trainer.h"
#include "profiling/record/device_tracer.h"

namespace shardscope {

struct ProcessLaunchOutcome {
  LaunchReport launch;              // logs restored from the rank processes' files
  std::vector<RankResult> results;  // per rank; empty weights where a rank failed
  // What every rank process's CUPTI recorded, each activity with its rank (empty on a CPU).
  std::vector<profiling::DeviceActivity> device_activity;
};

// Runs `config` as `config.world` rank processes of the shardscope binary (`shardscope worker`,
// or $SHARDSCOPE_WORKER), which meet through a TCPStore this launcher hosts on loopback and read
// the usual RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT. Rank 0's progress comes
// back through the store (`on_step`), results and event logs through files. When a rank fails
// or dies, the others get a grace period to stop on their own (their collectives fail as the
// dead rank's connections close), then SIGTERM, then SIGKILL: every child is reaped before this
// returns, and children die with the launcher (PR_SET_PDEATHSIG).
ProcessLaunchOutcome launch_rank_processes(const Config& config, const StepCallback& on_step);

// The binary a rank process runs: $SHARDSCOPE_WORKER (tests set it to the shardscope binary),
// else this executable.
std::string worker_executable();

// How a rank process ended, when whoever reads its outcome saw it end (the launcher); a folder
// read later (`shardscope collect` after torchrun or a scheduler) knows only the files.
struct RankExit {
  bool seen = false;
  int wait_status = 0;  // waitpid's status
  int64_t t_ns = 0;     // when it was reaped
  std::string stalled;  // why the launcher stopped it, when it stopped making progress
};

// The outcome of `world` rank processes from the files they left in `dir` (rank-R.json and
// rank-R.weights): the launcher's own and `shardscope collect`'s one path. `exits` holds one
// entry per rank or is empty (nothing seen). A rank whose file is missing, partial or
// contradicted by its exit is a failure saying so; failures are ordered with the ranks that
// vanished without a word first (their peers' errors follow from them), then by time.
ProcessLaunchOutcome read_rank_outcomes(const std::string& dir, int world,
                                        const std::vector<RankExit>& exits);

}  // namespace shardscope
