#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "profiling/rank_event_log.h"

namespace shardscope::profiling {

// Attributes every allocation made on a rank's thread (CPU allocator, CUDA caching allocator:
// both report to c10's memory-profiling hook) to that rank, and every free to the rank that
// allocated the block, whichever thread frees it. So ranks sharing one device or one process
// each see their own bytes, and the ranks' numbers add up to what they allocated together.
class RankMemoryTracker {
 public:
  RankMemoryTracker(int rank, RankEventLog* log);
  ~RankMemoryTracker();
  RankMemoryTracker(const RankMemoryTracker&) = delete;
  RankMemoryTracker& operator=(const RankMemoryTracker&) = delete;

  int64_t live_bytes() const;
  int64_t peak_bytes() const;
  int rank() const { return rank_; }

  // Called by the hook: `bytes` > 0 allocates `ptr`, < 0 frees it. Returns false when `ptr` is
  // not one of this rank's blocks (on a free). With a capacity set and `may_refuse`, an
  // allocation that would take the rank past it throws c10::OutOfMemoryError, as a device that
  // size would.
  bool record(void* ptr, int64_t bytes, bool may_refuse = false);

  // A simulated device capacity for this rank's (host) allocations; 0: none.
  void set_capacity(int64_t bytes);
  // What the rank held when an allocation was last refused (0: none was): by the time the
  // failure is reported, unwinding has freed some of it.
  int64_t held_when_refused() const;

  // Every allocation of this thread goes to `tracker` while the scope lives (null: none).
  class ThreadScope {
   public:
    explicit ThreadScope(RankMemoryTracker* tracker);
    ~ThreadScope();
    ThreadScope(const ThreadScope&) = delete;
    ThreadScope& operator=(const ThreadScope&) = delete;

   private:
    std::shared_ptr<void> guard_;
  };

  // What this thread allocates while the scope lives is no rank's (work outside training, such
  // as gathering the weights for the check); what it frees is still credited to the owner.
  class Paused {
   public:
    Paused();
    ~Paused();
    Paused(const Paused&) = delete;
    Paused& operator=(const Paused&) = delete;

   private:
    std::shared_ptr<void> guard_;
  };

  // Samples of `live` go to the rank's log as MemoryKind::kAllocated when it has moved since the
  // last sample by at least this much, or by 1/32 of the peak so far if that is more.
  static constexpr int64_t kSampleStepBytes = 1 << 20;

 private:
  void sample_locked();

  int rank_;
  RankEventLog* log_;
  mutable std::mutex mutex_;  // this rank's only; another rank takes it only to free our block
  std::unordered_map<void*, int64_t> blocks_;
  int64_t live_ = 0;
  int64_t peak_ = 0;
  int64_t last_sample_ = 0;
  int64_t capacity_ = 0;
  int64_t held_when_refused_ = 0;
};

}  // namespace shardscope::profiling
