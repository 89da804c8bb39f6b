#include "profiling/rank_event_log.h"

#include <utility>

namespace shardscope::profiling {

size_t RankEventLog::append(CommEvent event) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
  return events_.size() - 1;
}

void RankEventLog::stamp_complete(size_t index, int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < events_.size() && events_[index].t_complete_ns == 0) {
    events_[index].t_complete_ns = t_ns;
  }
}

void RankEventLog::stamp_wait_end(size_t index, int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < events_.size()) events_[index].t_wait_end_ns = t_ns;
}

void RankEventLog::mark_blocking(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < events_.size()) events_[index].async = false;
}

std::vector<CommEvent> RankEventLog::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

size_t RankEventLog::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

}  // namespace shardscope::profiling
