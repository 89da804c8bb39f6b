#pragma once

#include <mutex>

#include "profiling/trace.h"

namespace shardscope {

// --serialize-compute: rank threads sharing one device take turns on it. A rank holds the turn
// while it computes and gives it up whenever it waits for communication, so no two ranks ever
// compute at once and each rank's compute is timed as if it had the device to itself: the clean
// durations that projection needs. The time spent waiting for a turn is recorded as a host span
// ("wait for the device", category wait) that projection knows to leave out.
class DeviceTurns {
 public:
  // Process-wide, one per shared device.
  static DeviceTurns& instance();

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
    ~Release();
    Release(const Release&) = delete;
    Release& operator=(const Release&) = delete;

   private:
    bool released_ = false;
  };

  static constexpr const char* kWaitName = profiling::kDeviceTurnWaitName;

 private:
  DeviceTurns() = default;
  void acquire();
  void release();

  std::mutex device_;
};

}  // namespace shardscope
