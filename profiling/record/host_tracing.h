#pragma once

#include <cstddef>
#include <string_view>

#include "profiling/record/rank_event_log.h"

namespace shardscope::profiling {

// The log of the rank running on this thread (null outside rank threads: nothing is recorded).
RankEventLog* current_rank_log();

// Makes `log` the current rank log of this thread for the guard's lifetime.
class RankLogScope {
 public:
  explicit RankLogScope(RankEventLog* log);
  ~RankLogScope();
  RankLogScope(const RankLogScope&) = delete;
  RankLogScope& operator=(const RankLogScope&) = delete;

 private:
  RankEventLog* previous_;
};

// A host span of the current rank from construction to destruction.
class ScopedSpan {
 public:
  ScopedSpan(Category category, std::string_view name);
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  RankEventLog* log_;
  size_t index_ = 0;
};

}  // namespace shardscope::profiling
