#include "profiling/record/memory_tags.h"

#include <ATen/core/TensorBase.h>

#include "profiling/record/memory_tracker.h"

namespace shardscope::profiling {

void tag_memory(const at::TensorBase& tensor, MemoryKind kind) {
  if (!tensor.defined() || !tensor.has_storage()) return;
  RankMemoryTracker* tracker = RankMemoryTracker::current();
  const void* block = tensor.storage().data_ptr().get();
  if (tracker != nullptr && block != nullptr) tracker->retag(block, kind);
}

void set_memory_phase(MemoryKind phase) {
  if (RankMemoryTracker* tracker = RankMemoryTracker::current()) tracker->set_phase(phase);
}

MemoryTag::MemoryTag(MemoryKind kind) : tracker_(RankMemoryTracker::current()) {
  if (tracker_ != nullptr) tracker_->push_tag(kind);
}

MemoryTag::~MemoryTag() {
  if (tracker_ != nullptr) tracker_->pop_tag();
}

}  // namespace shardscope::profiling
