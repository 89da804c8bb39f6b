#pragma once

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "engine/train/config.h"

namespace shardscope {

// Who may join a job of rank processes. Workers meet at MASTER_ADDR:MASTER_PORT, and whatever
// else listens there is taken at its word: a second set of workers started on the same port, or
// a rank given another config, would otherwise train with the first (seeds 1234 and 2 together,
// both exiting 0). So a job has an identity: its run id (TORCHELASTIC_RUN_ID as torchrun gives
// it, or SHARDSCOPE_RUN_ID; with torchrun's restart count), and the hash of its config.
struct JobIdentity {
  std::string id;           // "default" when no run id is given
  std::string config_hash;  // FNV-1a of the config as JSON, hex
};

JobIdentity job_identity(const Config& config);

// Admits rank `rank` into the job on `store`: rank 0 announces the config hash, every other rank
// must present the same one, and each rank joins once. Rank 0 returns once all `world` ranks have
// joined, and names a rank that came with another config. Returns the store under which the job's
// own keys live, apart from any other job's. Throws ConfigError ("config" for a different config,
// "RANK" for a rank that already joined) or std::runtime_error when rank 0 never announces the
// job within `timeout`; `where` (MASTER_ADDR:PORT) goes into the messages.
c10::intrusive_ptr<c10d::Store> join_job(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                         int world, const JobIdentity& job,
                                         std::chrono::milliseconds timeout,
                                         const std::string& where);

}  // namespace shardscope
