#pragma once

#include "profiling/trace/trace.h"

namespace at {
class TensorBase;
}

namespace shardscope::profiling {

class RankMemoryTracker;

// What the engine and strategies tell the current rank's memory tracker about the blocks they
// allocate (see profiling/record/memory_tracker.h). Every call is a no-op on a thread whose
// allocations no rank tracks.

// Names the block holding `tensor`'s storage (a parameter's gradient, a bucket, ...).
void tag_memory(const at::TensorBase& tensor, MemoryKind kind);

// The rank's allocations outside backward and outside any MemoryTag scope, from now on.
void set_memory_phase(MemoryKind phase);

// What the rank allocates while the scope lives is `kind` (a strategy's buffers).
class MemoryTag {
 public:
  explicit MemoryTag(MemoryKind kind);
  ~MemoryTag();
  MemoryTag(const MemoryTag&) = delete;
  MemoryTag& operator=(const MemoryTag&) = delete;

 private:
  RankMemoryTracker* tracker_;
};

}  // namespace shardscope::profiling
