#pragma once

#include <vector>

#include "engine/config.h"
#include "engine/launcher.h"
#include "engine/trainer.h"

namespace shardscope {

struct ProcessLaunchOutcome {
  LaunchReport launch;              // logs restored from the rank processes' files
  std::vector<RankResult> results;  // per rank; empty weights where a rank failed
};

// Runs `config` as `config.world` rank processes of the shardscope binary (`shardscope worker`,
// or $SHARDSCOPE_WORKER), which meet through a TCPStore this launcher hosts on loopback and read
// the usual RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT. Rank 0's progress comes
// back through the store (`on_step`), results and event logs through files. When a rank fails
// or dies, the others get a grace period to stop on their own (their collectives fail as the
// dead rank's connections close), then SIGTERM, then SIGKILL: every child is reaped before this
// returns, and children die with the launcher (PR_SET_PDEATHSIG).
ProcessLaunchOutcome launch_rank_processes(const Config& config, const StepCallback& on_step);

}  // namespace shardscope
