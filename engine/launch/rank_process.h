#pragma once

#include <functional>
#include <string>

#include "engine/launch/gloo_network.h"
#include "engine/launch/launcher.h"
#include "engine/train/config.h"
#include "engine/train/trainer.h"

namespace shardscope {

// Who this process is in a multi-process run, the way torchrun, mpirun or a scheduler say it:
// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT. Rank 0 hosts the TCPStore unless its
// launcher already does: ours (SHARDSCOPE_STORE_HOSTED) or torchrun's agent
// (TORCHELASTIC_USE_AGENT_STORE=True, as PyTorch's env:// rendezvous reads it).
struct RankEnvironment {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool store_hosted_elsewhere = false;
  GlooNetwork gloo_network;  // GLOO_SOCKET_IFNAME, or this host's address toward MASTER_ADDR
  // SHARDSCOPE_LAUNCHER_REPORTS: our own launcher shows rank 0's steps and every failure, so
  // the worker prints neither.
  bool launcher_reports = false;
};

// Reads the environment; throws ConfigError naming the variable when one is missing or wrong.
RankEnvironment rank_environment_from_env();

// What a rank process tells the person watching it, besides its files (the worker prints it).
struct RankProcessReports {
  StepCallback on_step;                            // this rank's steps as they finish
  std::function<void(const RankFailure&)> failed;  // why this rank failed
  // Once the job took this process as its rank (a stray or refused worker never gets here): what
  // only the job's own rank may write, it writes then.
  std::function<void()> joined;
};

// Trains rank `env.rank` of `config` in this process: meets the others through the TCPStore,
// runs the rank like a rank thread, reports rank 0's progress through the store, and writes its
// outcome (result or failure, and its event log) into `out_dir` for the launcher. Returns 0 when
// the rank finished, 1 when it failed.
int run_rank_process(const Config& config, const RankEnvironment& env, const std::string& out_dir,
                     const RankProcessReports& reports = {});

// Store key under which rank 0 publishes its n-th step record (JSON) as the step finishes; a
// resumed run's first record is not step 0.
std::string progress_key(int record);

}  // namespace shardscope
