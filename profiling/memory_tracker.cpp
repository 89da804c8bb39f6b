#include "profiling/memory_tracker.h"

#include <algorithm>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>
#include <c10/util/ThreadLocalDebugInfo.h>

namespace shardscope::profiling {
namespace {

// Live trackers, so that a block freed on another rank's thread finds its owner.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<RankMemoryTracker*>& registry() {
  static std::vector<RankMemoryTracker*> r;
  return r;
}

class Reporter final : public c10::MemoryReportingInfoBase {
 public:
  explicit Reporter(RankMemoryTracker* tracker) : tracker_(tracker) {}

  void reportMemoryUsage(void* ptr, int64_t bytes, size_t, size_t, c10::Device device) override {
    // Without a tracker (paused) allocations go unrecorded, but frees still reach their owner.
    if (tracker_ == nullptr && bytes >= 0) return;
    // A simulated capacity refuses host allocations only: throwing out of a device allocator's
    // bookkeeping is not safe, and a real device enforces its own.
    if ((tracker_ != nullptr && tracker_->record(ptr, bytes, device.is_cpu())) || bytes >= 0)
      return;
    // Freed here, allocated by another rank.
    std::lock_guard<std::mutex> lock(registry_mutex());
    for (RankMemoryTracker* other : registry()) {
      if (other != tracker_ && other->record(ptr, bytes)) return;
    }
  }
  bool memoryProfilingEnabled() const override { return true; }

 private:
  RankMemoryTracker* tracker_;
};

}  // namespace

RankMemoryTracker::RankMemoryTracker(int rank, RankEventLog* log) : rank_(rank), log_(log) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(this);
}

RankMemoryTracker::~RankMemoryTracker() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), this), r.end());
}

void RankMemoryTracker::set_capacity(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = bytes;
}

bool RankMemoryTracker::record(void* ptr, int64_t bytes, bool may_refuse) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (may_refuse && bytes > 0 && capacity_ > 0 && live_ + bytes > capacity_) {
    held_when_refused_ = live_;
    // The block was allocated already; refusing it leaks it, which ends the run anyway.
    TORCH_CHECK_WITH(OutOfMemoryError, false, "tried to allocate ", bytes, " bytes with ", live_,
                     " of ", capacity_, " in use (the simulated capacity, --memory-limit-mb)");
  }
  if (bytes >= 0) {
    blocks_[ptr] = bytes;
    live_ += bytes;
    peak_ = std::max(peak_, live_);
  } else {
    auto it = blocks_.find(ptr);
    if (it == blocks_.end()) return false;
    live_ -= it->second;
    blocks_.erase(it);
  }
  // A step of 1/32 of the peak so far (at least kSampleStepBytes) keeps a curve with every
  // swing that matters at a few dozen samples per step.
  const int64_t step = std::max(kSampleStepBytes, peak_ / 32);
  if (log_ != nullptr && std::abs(live_ - last_sample_) >= step) sample_locked();
  return true;
}

void RankMemoryTracker::sample_locked() {
  last_sample_ = live_;
  log_->add_memory(MemoryKind::kAllocated, live_);
}

int64_t RankMemoryTracker::held_when_refused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_when_refused_;
}

int64_t RankMemoryTracker::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_;
}

int64_t RankMemoryTracker::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

RankMemoryTracker::ThreadScope::ThreadScope(RankMemoryTracker* tracker) {
  if (tracker == nullptr) return;
  guard_ = std::make_shared<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE,
                                                 std::make_shared<Reporter>(tracker));
}

RankMemoryTracker::ThreadScope::~ThreadScope() = default;

RankMemoryTracker::Paused::Paused()
    : guard_(std::make_shared<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE,
                                                   std::make_shared<Reporter>(nullptr))) {}

RankMemoryTracker::Paused::~Paused() = default;

}  // namespace shardscope::profiling
