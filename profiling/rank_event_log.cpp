#include "profiling/rank_event_log.h"

#include <utility>

#include "profiling/clock.h"

namespace shardscope::profiling {

void RankEventLog::set_position(int step, int micro) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
  micro_ = static_cast<int16_t>(micro);
}

size_t RankEventLog::append(CommEvent event) {
  std::lock_guard<std::mutex> lock(mutex_);
  event.step = step_;
  event.micro = micro_;
  events_.push_back(std::move(event));
  return events_.size() - 1;
}

void RankEventLog::stamp_complete(size_t index, int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < events_.size() && events_[index].t_complete_ns == 0) {
    events_[index].t_complete_ns = t_ns;
  }
}

void RankEventLog::stamp_wait_begin(size_t index, int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < events_.size() && events_[index].t_wait_begin_ns == 0) {
    events_[index].t_wait_begin_ns = t_ns;
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

size_t RankEventLog::begin_span(std::string name, Category category) {
  const int64_t t = now_ns();
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back({std::move(name), category, t, 0, step_, micro_});
  return spans_.size() - 1;
}

void RankEventLog::end_span(size_t index) {
  const int64_t t = now_ns();
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < spans_.size() && spans_[index].t1_ns == 0) spans_[index].t1_ns = t;
}

void RankEventLog::add_memory(MemoryKind kind, int64_t bytes) {
  const int64_t t = now_ns();
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.push_back({t, kind, bytes});
}

void RankEventLog::add_memory_at(int64_t t_ns, MemoryKind kind, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.push_back({t_ns, kind, bytes});
}

std::vector<CommEvent> RankEventLog::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

void RankEventLog::restore(std::vector<CommEvent> events, std::vector<HostSpan> spans,
                           std::vector<MemorySample> memory) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_ = std::move(events);
  spans_ = std::move(spans);
  memory_ = std::move(memory);
}

std::vector<HostSpan> RankEventLog::spans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return spans_;
}

std::vector<MemorySample> RankEventLog::memory() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return memory_;
}

size_t RankEventLog::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

bool logged_peak(const std::vector<MemorySample>& samples, MemoryCategories* out) {
  const size_t n = kMemoryCategoryCount + 1;
  for (size_t end = samples.size(); end >= n; --end) {
    const size_t first = end - n;
    if (samples[first].kind != MemoryKind::kAllocated) continue;
    bool whole = true;
    for (int k = 0; k < kMemoryCategoryCount && whole; ++k) {
      const MemorySample& s = samples[first + 1 + k];
      whole = s.kind == static_cast<MemoryKind>(k) && s.t_ns == samples[first].t_ns;
    }
    if (!whole) continue;
    for (int k = 0; k < kMemoryCategoryCount; ++k) (*out)[k] = samples[first + 1 + k].bytes;
    return true;
  }
  return false;
}

}  // namespace shardscope::profiling
