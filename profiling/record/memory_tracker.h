#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "profiling/record/block_map.h"
#include "profiling/record/rank_event_log.h"
#include "profiling/record/spin_lock.h"

namespace shardscope::profiling {

// Attributes every allocation made on a rank's thread (CPU allocator, CUDA caching allocator:
// both report to c10's memory-profiling hook) to that rank, and every free to the rank that
// allocated the block, whichever thread frees it. So ranks sharing one device or one process
// each see their own bytes, and the ranks' numbers add up to what they allocated together.
//
// Every block also carries what it is (its provenance), so no category is a remainder:
// - the tag is set at allocation: a scope the strategy opened (communication buffers, ...) if
//   any; else, inside autograd's backward, temporaries; else, on a communication backend's
//   worker thread, communication buffers; else the rank's phase, which the trainer sets
//   (set-up: parameters, forward: activations, optimizer step: optimizer state, other:
//   temporaries);
// - those three phase tags are provisional: a block freed in the same phase it was allocated in
//   was scratch, a temporary. For a forward block that means "freed before any backward began",
//   so activations are exactly what forward allocated and was still alive when backward started;
// - `retag` names a block later (a parameter's .grad after backward, a strategy's buffers).
// Per-category live counters are kept, and at each new peak the six are copied (O(1)), so the
// peak's breakdown is exact. A reclassification or retag of a block that was live at the peak
// (allocated before it, still alive) moves its bytes in the peak's copy too.
class RankMemoryTracker {
 public:
  RankMemoryTracker(int rank, RankEventLog* log);
  ~RankMemoryTracker();
  RankMemoryTracker(const RankMemoryTracker&) = delete;
  RankMemoryTracker& operator=(const RankMemoryTracker&) = delete;

  int64_t live_bytes() const;
  int64_t peak_bytes() const;
  int rank() const { return rank_; }
  MemoryCategories live_categories() const;
  // What was live at the peak, by category; sums to peak_bytes().
  MemoryCategories peak_categories() const;
  // The most activations live when a backward began (what forward saved for it).
  int64_t activations_at_backward() const;

  // How an allocation is made, as the hook sees it: in autograd's backward (on whatever
  // thread), on the rank's own thread outside it, or on another thread that inherited the rank's
  // hook outside backward: a communication backend's worker (Gloo copies into its own outputs
  // there), whose blocks are communication buffers and which says nothing about the phase.
  enum class Context : uint8_t { kUnknown, kOutsideBackward, kBackward, kBackendThread };

  // Called by the hook: `bytes` > 0 allocates `ptr`, < 0 frees it. Returns false when `ptr` is
  // not one of this rank's blocks (on a free). With a capacity set and `may_refuse`, an
  // allocation that would take the rank past it throws c10::OutOfMemoryError, as a device that
  // size would.
  bool record(void* ptr, int64_t bytes, bool may_refuse = false,
              Context context = Context::kUnknown);

  // What this rank's allocations outside backward and outside any tag scope are: kParameters,
  // kActivations, kOptimizerState (provisional, see above) or kTemporaries.
  void set_phase(MemoryKind phase);
  // Names the live block at `ptr` (false: not one of this rank's).
  bool retag(const void* ptr, MemoryKind kind);
  // Allocations of the rank are `kind` until the matching pop (strategies' buffer scopes).
  void push_tag(MemoryKind kind);
  void pop_tag();

  // Appends the peak's breakdown to the log, stamped with the peak's time (so a reader taking
  // the moment of the largest allocation sample finds these exact values there).
  void log_peak();

  // The tracker this thread's allocations go to (null: none).
  static RankMemoryTracker* current();
  // Whether the calling thread is the rank's own (see Context).
  bool on_owner_thread() const {
    return std::this_thread::get_id() == owner_.load(std::memory_order_relaxed);
  }

  // A simulated device capacity for this rank's (host) allocations; 0: none.
  void set_capacity(int64_t bytes);
  // What the rank held when an allocation was last refused (0: none was): by the time the
  // failure is reported, unwinding has freed some of it.
  int64_t held_when_refused() const;
  // What it held then, by category (all zero: none was refused).
  MemoryCategories refused_categories() const;

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

  // Samples of `live` go to the rank's log as MemoryKind::kAllocated, with every category's live
  // bytes, when it has moved since the last sample by at least this much, or by 1/32 of the
  // peak so far if that is more.
  // (64 KiB: a tiny model's pipeline stage, which moves less than 1 MiB, still gets a curve.)
  static constexpr int64_t kSampleStepBytes = 64 << 10;

 private:
  struct Block {
    int64_t bytes = 0;
    uint64_t seq = 0;    // allocation order: live at the peak iff seq <= peak_seq_
    uint32_t epoch = 0;  // the phase it was allocated in; kSettled once its tag is final
    MemoryKind kind = MemoryKind::kTemporaries;
  };
  static constexpr uint32_t kSettled = ~0u;

  void move_locked(Block& block, MemoryKind to);
  void enter_locked(bool backward);
  void sample_locked();

  int rank_;
  RankEventLog* log_;
  // This rank's only; another thread takes it only to free our block or to allocate on our
  // behalf (a backend's worker, autograd's device thread).
  mutable SpinLock mutex_;
  BlockMap<Block> blocks_;
  int64_t live_ = 0;
  int64_t peak_ = 0;
  int64_t last_sample_ = 0;
  int64_t moved_since_sample_ = 0;
  int64_t capacity_ = 0;
  int64_t held_when_refused_ = 0;
  MemoryCategories refused_by_kind_{};
  MemoryCategories live_by_kind_{};
  MemoryCategories peak_by_kind_{};
  uint64_t seq_ = 0;
  uint64_t peak_seq_ = 0;
  int64_t peak_t_ns_ = 0;
  MemoryKind phase_ = MemoryKind::kTemporaries;
  // The rank's own thread (the last ThreadScope opened for it).
  std::atomic<std::thread::id> owner_{};
  uint32_t epoch_ = 0;  // bumped at every phase change, forward <-> backward included
  bool in_backward_ = false;
  int64_t activations_at_backward_ = 0;
  MemoryKind tags_[8] = {};  // the scopes' tags, innermost last
  int tag_depth_ = 0;
};

}  // namespace shardscope::profiling
