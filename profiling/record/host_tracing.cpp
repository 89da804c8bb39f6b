#include "profiling/record/host_tracing.h"

namespace shardscope::profiling {
namespace {

thread_local RankEventLog* current_log = nullptr;

}  // namespace

RankEventLog* current_rank_log() {
  return current_log;
}

RankLogScope::RankLogScope(RankEventLog* log) : previous_(current_log) {
  current_log = log;
}

RankLogScope::~RankLogScope() {
  current_log = previous_;
}

ScopedSpan::ScopedSpan(Category category, std::string_view name) : log_(current_log) {
  if (log_ != nullptr) index_ = log_->begin_span(name, category);
}

ScopedSpan::~ScopedSpan() {
  if (log_ != nullptr) log_->end_span(index_);
}

}  // namespace shardscope::profiling
