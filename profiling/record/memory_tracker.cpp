#include "profiling/record/memory_tracker.h"

#include <algorithm>
#include <mutex>
#include <typeinfo>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/autograd/graph_task.h>

#include "profiling/record/clock.h"

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
    // Autograd's backward runs on this thread (CPU) or on a device thread that inherits this
    // reporter: either way the graph task says whether this block is backward's.
    using Context = RankMemoryTracker::Context;
    Context context = Context::kUnknown;
    if (tracker_ != nullptr) {
      context = torch::autograd::get_current_graph_task_id() != -1 ? Context::kBackward
                : tracker_->on_owner_thread()                      ? Context::kOutsideBackward
                                                                   : Context::kBackendThread;
    }
    // A simulated capacity refuses host allocations only: throwing out of a device allocator's
    // bookkeeping is not safe, and a real device enforces its own.
    if ((tracker_ != nullptr && tracker_->record(ptr, bytes, device.is_cpu(), context)) ||
        bytes >= 0)
      return;
    // Freed here, allocated by another rank.
    std::lock_guard<std::mutex> lock(registry_mutex());
    for (RankMemoryTracker* other : registry()) {
      if (other != tracker_ && other->record(ptr, bytes)) return;
    }
  }
  bool memoryProfilingEnabled() const override { return true; }

  RankMemoryTracker* tracker() const { return tracker_; }

 private:
  RankMemoryTracker* tracker_;
};

// The Reporter collecting this thread's allocations for a rank (null: none, or another hook's).
Reporter* tracking_reporter() {
  c10::DebugInfoBase* info = c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE);
  return info != nullptr && typeid(*info) == typeid(Reporter) ? static_cast<Reporter*>(info)
                                                              : nullptr;
}

// The CPU allocator. On a thread with a Reporter, c10's default CPU allocator reports each block
// through a process-wide mutex and its own hash map of every live block (so that a free can say
// its size), which costs as much again as the tracker itself, and makes the ranks' threads queue
// on one lock; the tracker needs neither (it knows its blocks' sizes). So on such a thread this
// allocates as the default does (c10::alloc_cpu) and reports straight to the Reporter; on any
// other thread it is the default allocator, untouched.
class TrackedCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    Reporter* reporter = tracking_reporter();
    if (reporter == nullptr) return c10::GetDefaultCPUAllocator()->allocate(bytes);
    void* data = nullptr;
    try {
      data = c10::alloc_cpu(bytes);
    } catch (const c10::Error&) {
      c10::profiledCPUMemoryReporter().OutOfMemory(bytes);
      throw;
    }
    if (bytes > 0) reporter->reportMemoryUsage(data, static_cast<int64_t>(bytes), 0, 0, kCpu);
    return {data, data, &release, kCpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  static inline const c10::Device kCpu{c10::DeviceType::CPU};

  // As the default allocator's: a free is reported when the freeing thread has a Reporter (the
  // tracker owning the block knows its size, so the size reported is only a sign).
  static void release(void* data) {
    if (data == nullptr) return;
    if (Reporter* reporter = tracking_reporter()) reporter->reportMemoryUsage(data, -1, 0, 0, kCpu);
    c10::free_cpu(data);
  }
};

// Installed before main, so no thread sees the CPU allocator change under it; never destroyed,
// since blocks are freed during exit.
[[maybe_unused]] const bool tracked_cpu_allocator_installed = [] {
  c10::SetCPUAllocator(new TrackedCpuAllocator(), /*priority=*/1);
  return true;
}();

bool provisional(MemoryKind kind) {
  return kind == MemoryKind::kParameters || kind == MemoryKind::kActivations ||
         kind == MemoryKind::kOptimizerState;
}

int index(MemoryKind kind) {
  return static_cast<int>(kind);
}

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
  std::lock_guard<SpinLock> lock(mutex_);
  capacity_ = bytes;
}

bool RankMemoryTracker::record(void* ptr, int64_t bytes, bool may_refuse, Context context) {
  std::lock_guard<SpinLock> lock(mutex_);
  if (may_refuse && bytes > 0 && capacity_ > 0 && live_ + bytes > capacity_) {
    held_when_refused_ = live_;
    refused_by_kind_ = live_by_kind_;
    // The block was allocated already; refusing it leaks it, which ends the run anyway.
    TORCH_CHECK_WITH(OutOfMemoryError, false, "tried to allocate ", bytes, " bytes with ", live_,
                     " of ", capacity_, " in use (the simulated capacity, --memory-limit-mb)");
  }
  if (context == Context::kBackward || context == Context::kOutsideBackward)
    enter_locked(context == Context::kBackward);
  if (bytes >= 0) {
    Block block;
    block.bytes = bytes;
    block.seq = ++seq_;
    if (tag_depth_ > 0) {
      block.kind = tags_[tag_depth_ - 1];
      block.epoch = kSettled;
    } else if (context == Context::kBackendThread) {
      block.kind = MemoryKind::kCommBuffers;
      block.epoch = kSettled;
    } else if (in_backward_) {
      block.kind = MemoryKind::kTemporaries;
      block.epoch = kSettled;
    } else {
      block.kind = phase_;
      block.epoch = provisional(phase_) ? epoch_ : kSettled;
    }
    live_by_kind_[index(block.kind)] += bytes;
    blocks_.assign(ptr, block);
    live_ += bytes;
    if (live_ > peak_) {
      peak_ = live_;
      peak_seq_ = seq_;
      peak_by_kind_ = live_by_kind_;
      peak_t_ns_ = now_ns();
    }
  } else {
    Block* found = blocks_.find(ptr);
    if (found == nullptr) return false;
    Block& block = *found;
    // Freed in the phase that allocated it: it was scratch (a forward's block gone before any
    // backward began, an optimizer step's working memory), whatever the phase's tag said.
    if (block.epoch == epoch_) move_locked(block, MemoryKind::kTemporaries);
    live_by_kind_[index(block.kind)] -= block.bytes;
    live_ -= block.bytes;
    blocks_.erase(found);
  }
  // A step of 1/32 of the peak so far (at least kSampleStepBytes) keeps a curve with every
  // swing that matters at a few dozen samples per step.
  const int64_t step = std::max(kSampleStepBytes, peak_ / 32);
  if (log_ != nullptr && (std::abs(live_ - last_sample_) >= step || moved_since_sample_ >= step)) {
    sample_locked();
  }
  return true;
}

void RankMemoryTracker::move_locked(Block& block, MemoryKind to) {
  block.epoch = kSettled;
  if (block.kind == to) return;
  live_by_kind_[index(block.kind)] -= block.bytes;
  live_by_kind_[index(to)] += block.bytes;
  if (block.seq <= peak_seq_) {  // it was live at the peak (it is still, or being freed now)
    peak_by_kind_[index(block.kind)] -= block.bytes;
    peak_by_kind_[index(to)] += block.bytes;
  }
  moved_since_sample_ += block.bytes;
  block.kind = to;
}

void RankMemoryTracker::enter_locked(bool backward) {
  if (backward == in_backward_) return;
  in_backward_ = backward;
  ++epoch_;
  if (backward) {
    activations_at_backward_ =
        std::max(activations_at_backward_, live_by_kind_[index(MemoryKind::kActivations)]);
  }
}

void RankMemoryTracker::set_phase(MemoryKind phase) {
  std::lock_guard<SpinLock> lock(mutex_);
  phase_ = phase;
  in_backward_ = false;
  ++epoch_;
}

bool RankMemoryTracker::retag(const void* ptr, MemoryKind kind) {
  std::lock_guard<SpinLock> lock(mutex_);
  Block* found = blocks_.find(ptr);
  if (found == nullptr) return false;
  move_locked(*found, kind);
  return true;
}

void RankMemoryTracker::push_tag(MemoryKind kind) {
  std::lock_guard<SpinLock> lock(mutex_);
  // Deeper nesting than any strategy needs keeps the innermost tag.
  if (tag_depth_ < static_cast<int>(std::size(tags_))) {
    tags_[tag_depth_] = kind;
  } else {
    tags_[tag_depth_ - 1] = kind;
  }
  ++tag_depth_;
}

void RankMemoryTracker::pop_tag() {
  std::lock_guard<SpinLock> lock(mutex_);
  if (tag_depth_ > 0) --tag_depth_;
}

void RankMemoryTracker::sample_locked() {
  last_sample_ = live_;
  moved_since_sample_ = 0;
  log_->add_memory(MemoryKind::kAllocated, live_);
  for (int k = 0; k < kMemoryCategoryCount; ++k)
    log_->add_memory(static_cast<MemoryKind>(k), live_by_kind_[k]);
}

void RankMemoryTracker::log_peak() {
  std::lock_guard<SpinLock> lock(mutex_);
  if (log_ == nullptr || peak_ == 0) return;
  log_->add_memory_at(peak_t_ns_, MemoryKind::kAllocated, peak_);
  for (int k = 0; k < kMemoryCategoryCount; ++k)
    log_->add_memory_at(peak_t_ns_, static_cast<MemoryKind>(k), peak_by_kind_[k]);
}

MemoryCategories RankMemoryTracker::live_categories() const {
  std::lock_guard<SpinLock> lock(mutex_);
  return live_by_kind_;
}

MemoryCategories RankMemoryTracker::refused_categories() const {
  std::lock_guard<SpinLock> lock(mutex_);
  return refused_by_kind_;
}

int64_t RankMemoryTracker::activations_at_backward() const {
  std::lock_guard<SpinLock> lock(mutex_);
  return activations_at_backward_;
}

MemoryCategories RankMemoryTracker::peak_categories() const {
  std::lock_guard<SpinLock> lock(mutex_);
  return peak_by_kind_;
}

RankMemoryTracker* RankMemoryTracker::current() {
  auto* reporter =
      dynamic_cast<Reporter*>(c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE));
  return reporter != nullptr ? reporter->tracker() : nullptr;
}

int64_t RankMemoryTracker::held_when_refused() const {
  std::lock_guard<SpinLock> lock(mutex_);
  return held_when_refused_;
}

int64_t RankMemoryTracker::live_bytes() const {
  std::lock_guard<SpinLock> lock(mutex_);
  return live_;
}

int64_t RankMemoryTracker::peak_bytes() const {
  std::lock_guard<SpinLock> lock(mutex_);
  return peak_;
}

RankMemoryTracker::ThreadScope::ThreadScope(RankMemoryTracker* tracker) {
  if (tracker == nullptr) return;
  tracker->owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  guard_ = std::make_shared<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE,
                                                 std::make_shared<Reporter>(tracker));
}

RankMemoryTracker::ThreadScope::~ThreadScope() = default;

RankMemoryTracker::Paused::Paused()
    : guard_(std::make_shared<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE,
                                                   std::make_shared<Reporter>(nullptr))) {}

RankMemoryTracker::Paused::~Paused() = default;

}  // namespace shardscope::profiling
