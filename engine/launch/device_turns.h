#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "profiling/trace/trace.h"

namespace shardscope {

// Ranks sharing one device take turns on it (the default; `--contended` turns it off). A rank holds
// the turn while it computes and gives it up whenever it waits for communication, so no two ranks
// ever compute at once and each rank's compute is timed as if it had the device to itself: the
// clean durations that projection needs. The time spent waiting for a turn is recorded as a host
// span
// ("wait for the device", category wait) that projection knows to leave out.
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

 private:
  DeviceTurns() = default;
  void acquire();
  void release();

  void pin(bool computing);
  // The turn across processes (the lock file), within the wait limit; then says who holds it.
  void take_file_lock();
  std::string holder() const;

  std::mutex device_;  // among this process's threads
  int lock_fd_ = -1;   // among processes (flock), when shared
  int rank_ = -1;
  std::mutex pinning_;
  std::vector<int> compute_cpus_, communication_cpus_;  // empty: no pinning
};

}  // namespace shardscope
