#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "profiling/trace/trace.h"

namespace shardscope {
namespace profiling {
class RankEventLog;
}  // namespace profiling

// Ranks sharing one device take turns on it (the default; `--contended` turns it off). A rank holds
// the turn while it computes and gives it up whenever it waits for communication, so no two ranks
// ever compute at once and each rank's compute is timed as if it had the device to itself: the
// clean durations that projection needs. The time spent waiting for a turn is recorded as a host
// span
// ("wait for the device", category wait) that projection knows to leave out.
//
// The turn belongs to the rank, not to a thread. In a rank process (one rank per process) any of
// its threads that waits gives the turn up and takes it back: on a GPU, autograd runs backward
// and the hooks that wait inside it (an all-gather, a reduce-scatter, the Reducer's callback) on
// a device thread of its own, while the rank's thread that holds the turn waits for backward.
// Rank threads of one process hold it per thread (each rank is its thread).
class DeviceTurns {
 public:
  // Process-wide, one per shared device.
  static DeviceTurns& instance();
  // Rank processes on one host share its device too: with a lock file (flock: the kernel lets go
  // of it when a process dies, so a crashed rank never leaves the device taken) turns are taken
  // across every process that opens the same path. Throws std::runtime_error naming the file.
  // `rank` names this process to a peer that waits too long for the turn.
  void share_across_processes(const std::string& lock_path, int rank = -1);

  // How long a rank process waits for the turn before it gives up and names the rank holding it
  // (a stopped or hung process would otherwise hold every peer for ever): the same bound as a
  // collective's, which the trainer sets as it tightens. Zero waits for ever.
  static void set_wait_limit(std::chrono::milliseconds limit);

  // On a CPU "device", the collectives of ranks that are not computing run on the same cores
  // (Gloo's threads, the kernel's loopback TCP) and slow the one that is: on two cores that
  // made a rank's backward 30 % slower in some steps, and overlap look slower than none. With
  // pinning on, the turn's holder computes on the first `compute_cores` allowed cores and every
  // other thread of a rank runs on the rest, like a GPU's copy engines beside its SMs. Off (the
  // default) when fewer than compute_cores + 1 cores are allowed.
  void pin_compute_cores(int compute_cores);
  // This thread (a rank's, before it makes its process group, whose threads inherit it) keeps
  // to the communication cores while it does not hold the turn.
  static void keep_to_communication_cores();

  // What giving the turn up waits for first (null: nothing). On a GPU a rank's call returns
  // before its kernels have run: passing the turn on then let the next rank's kernels start
  // beside them (rank processes' contexts time-sliced without MPS, rank threads' streams sharing
  // the SMs), so each rank's recorded kernels could take longer than on a GPU of its own
  // (docs/running-on-a-gpu.md).
  // The launcher sets a device synchronize for a CUDA device; SHARDSCOPE_TURN_DRAIN=0 leaves it
  // out, to measure what it changes.
  void drain_before_release(std::function<void()> drain);
  // Whether ranks taking turns on a CUDA device (`cuda`) drain it: unless
  // SHARDSCOPE_TURN_DRAIN=0.
  static bool drains_gpu(bool cuda);

  // Holds the turn on this thread for the scope's life (only when `enabled`).
  class Scope {
   public:
    explicit Scope(bool enabled);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    bool held_ = false;
  };

  // Gives the turn up for the scope's life if this thread holds it (around a wait).
  class Release {
   public:
    Release();
    Release(const Release&) = delete;
    Release& operator=(const Release&) = delete;
    // Takes the turn back, and may throw: a turn not given back within the wait limit ends the
    // rank (only when no exception is already in flight).
    ~Release() noexcept(false);

   private:
    bool released_ = false;
  };

  // For waits inside code that is not ours and ends elsewhere (PyTorch's Reducer waits at
  // backward's end, in a callback): gives the turn up, if this thread holds it, until take_back()
  // on the same thread.
  static void give_up_until_taken_back();
  static void take_back();

  static constexpr const char* kWaitName = profiling::kDeviceTurnWaitName;

  // Whether a rank holds the turn, and gave it up until take_back().
  struct TurnState {
    std::atomic<bool> holds{false};
    std::atomic<bool> given_up{false};
  };

 private:
  DeviceTurns() = default;
  TurnState& turn_of_this_rank();

  void acquire();
  void release();
  void free_device();  // lets the next of this process's threads have the device

  void pin(bool computing);
  // The turn across processes (the lock file), within the wait limit; then says who holds it.
  void take_file_lock();
  std::string holder() const;

  // The turn among this process's threads: a lock that any thread of the rank may let go of
  // (a std::mutex must be unlocked by the thread that locked it).
  std::mutex device_;
  std::condition_variable device_free_;
  bool device_taken_ = false;
  TurnState process_turn_;  // the rank's, when the process is one rank
  std::atomic<bool> one_rank_per_process_{false};
  // The rank's event log, for the wait span of a thread that has none (autograd's).
  std::atomic<profiling::RankEventLog*> rank_log_{nullptr};
  int lock_fd_ = -1;  // among processes (flock), when shared
  int rank_ = -1;
  std::mutex draining_;
  std::function<void()> drain_;
  std::mutex pinning_;
  std::vector<int> compute_cpus_, communication_cpus_;  // empty: no pinning
};

}  // namespace shardscope
