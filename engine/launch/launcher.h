#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/launch/gloo_network.h"
#include "engine/launch/rank_context.h"
#include "profiling/record/rank_event_log.h"

namespace shardscope {

struct LaunchSpec {
  int world = 1;
  std::string backend = "shm";
  std::string device = "cpu";
  std::chrono::milliseconds timeout{60000};
  int threads_per_rank = 0;  // 0: cores / world, at least 1 (launch_spec sets it when taking turns)
  bool emulate_flat_collectives = false;
  // Every call's tensors through host copies, as CUDA tensors on Gloo are (tests; Comm::Options).
  bool stage_through_host = false;
  bool tracing = true;                // false: ranks record nothing (their logs stay empty)
  bool take_turns = false;            // ranks take turns on the device (DeviceTurns)
  int64_t memory_capacity_bytes = 0;  // a simulated device capacity per rank (host memory); 0: none
  GlooNetwork gloo_network;           // rank threads: loopback
  // Ranks take turns on a CPU "device": the holder computes on cores of its own
  // (DeviceTurns::pin_compute_cores) and can tell its own time from the machine's.
  bool takes_turns_on_cpu() const { return take_turns && device.rfind("cpu", 0) == 0; }
  // Watches the ranks' logs while they train (the GUI's live timeline): called with the logs
  // before the ranks start, and with null once they have all stopped, after which the logs
  // must not be touched. Called on the launching thread.
  std::function<void(const std::vector<const profiling::RankEventLog*>*)> watch_logs;
};

struct RankFailure {
  int rank = -1;
  std::string message;
  int64_t t_ns = 0;
};

struct LaunchReport {
  std::vector<std::unique_ptr<profiling::RankEventLog>> logs;  // one per rank
  std::vector<RankFailure> failures;                           // earliest first
  std::vector<int64_t> peak_allocated_bytes;  // per rank: the most its threads held at once
  bool ok() const { return failures.empty(); }
  // The failure that started it: the earliest; later ones are usually its consequence.
  const RankFailure* root_failure() const { return failures.empty() ? nullptr : &failures.front(); }
};

// Runs `body` on `world` rank threads in this process. Each thread gets its own process group
// (over a shared in-memory store) and traced Comm. A rank that throws tears down its group, so
// peers blocked in a collective with it fail fast instead of hanging; every thread is joined
// before this returns.
LaunchReport launch_rank_threads(const LaunchSpec& spec,
                                 const std::function<void(RankContext&)>& body);

int default_threads_per_rank(int world);

// How `config`'s ranks are to run, whether as threads here or as one rank process each.
LaunchSpec launch_spec(const Config& config);

}  // namespace shardscope
