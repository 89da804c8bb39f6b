#include "profiling/record/rank_event_log.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <mutex>
#include <utility>

#include "profiling/record/clock.h"

namespace shardscope::profiling {

void RankEventLog::set_position(int step, int micro) {
  std::lock_guard<SpinLock> lock(mutex_);
  step_ = step;
  micro_ = static_cast<int16_t>(micro);
}

size_t RankEventLog::append(const CommCall& call) {
  std::lock_guard<SpinLock> lock(mutex_);
  append_locked(call, step_, micro_);
  return calls_.size() - 1;
}

void RankEventLog::append_locked(const CommCall& call, int32_t step, int16_t micro) {
  Call& c = calls_.emplace_back();
  c.op = intern_comm_locked(call.op);
  c.group = intern_comm_locked(call.group);
  c.dtype = intern_comm_locked(call.dtype);
  c.async = call.async;
  c.emulated = call.emulated;
  c.group_size = call.group_size;
  c.peer = call.peer;
  c.step = step;
  c.micro = micro;
  c.seq = call.seq;
  c.bytes = call.bytes;
  c.t_issue_ns = call.t_issue_ns;
}

uint16_t RankEventLog::intern_comm_locked(std::string_view name) {
  for (size_t i = 0; i < comm_name_views_.size(); ++i) {
    if (comm_name_views_[i] == name) return static_cast<uint16_t>(i);
  }
  comm_names_.emplace_back(name);
  comm_name_views_.push_back(comm_names_.back());
  return static_cast<uint16_t>(comm_name_views_.size() - 1);
}

void RankEventLog::stamp_complete(size_t index, int64_t t_ns) {
  std::lock_guard<SpinLock> lock(mutex_);
  if (index < calls_.size() && calls_[index].t_complete_ns == 0) {
    calls_[index].t_complete_ns = t_ns;
  }
}

void RankEventLog::stamp_wait_begin(size_t index, int64_t t_ns) {
  std::lock_guard<SpinLock> lock(mutex_);
  if (index < calls_.size() && calls_[index].t_wait_begin_ns == 0) {
    calls_[index].t_wait_begin_ns = t_ns;
  }
}

void RankEventLog::stamp_wait_end(size_t index, int64_t t_ns) {
  std::lock_guard<SpinLock> lock(mutex_);
  if (index < calls_.size()) calls_[index].t_wait_end_ns = t_ns;
}

void RankEventLog::mark_blocking(size_t index) {
  std::lock_guard<SpinLock> lock(mutex_);
  if (index < calls_.size()) calls_[index].async = false;
}

uint32_t RankEventLog::intern_locked(std::string_view name) {
  auto found = name_ids_.find(name);
  if (found != name_ids_.end()) return found->second;
  const auto id = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  name_ids_.emplace(names_.back(), id);
  return id;
}

namespace {

thread_local bool measures_cpu_time = false;

// A small number of this thread's own, never 0 (0: no thread measured the span).
uint32_t this_thread_number() {
  static std::atomic<uint32_t> next{1};
  thread_local const uint32_t number = next.fetch_add(1);
  return number;
}

}  // namespace

void RankEventLog::measure_cpu_time_on_this_thread(bool on) {
  measures_cpu_time = on;
}

size_t RankEventLog::begin_span(std::string_view name, Category category) {
  const int64_t cpu = measures_cpu_time ? thread_cpu_ns() : -1;
  const uint32_t thread = cpu >= 0 ? this_thread_number() : 0;
  const int64_t t = now_ns();
  std::lock_guard<SpinLock> lock(mutex_);
  spans_.push_back({intern_locked(name), category, micro_, step_, t, 0, cpu, thread});
  return spans_.size() - 1;
}

void RankEventLog::end_span(size_t index) {
  const int64_t t = now_ns();
  const int64_t cpu = measures_cpu_time ? thread_cpu_ns() : -1;
  const uint32_t thread = cpu >= 0 ? this_thread_number() : 0;
  std::lock_guard<SpinLock> lock(mutex_);
  if (index >= spans_.size() || spans_[index].t1_ns != 0) return;
  Span& s = spans_[index];
  s.t1_ns = t;
  if (s.cpu0_ns >= 0 && cpu >= 0 && s.thread == thread) {
    const int64_t off = (t - s.t0_ns) - (cpu - s.cpu0_ns);
    s.off_cpu_us = static_cast<int32_t>(std::clamp<int64_t>(off / 1000, 0, INT32_MAX));
  }
}

void RankEventLog::add_memory(MemoryKind kind, int64_t bytes) {
  const int64_t t = now_ns();
  std::lock_guard<SpinLock> lock(mutex_);
  memory_.push_back({t, kind, bytes});
}

void RankEventLog::add_memory_at(int64_t t_ns, MemoryKind kind, int64_t bytes) {
  std::lock_guard<SpinLock> lock(mutex_);
  memory_.push_back({t_ns, kind, bytes});
}

std::vector<CommEvent> RankEventLog::snapshot() const {
  std::lock_guard<SpinLock> lock(mutex_);
  std::vector<CommEvent> out;
  out.reserve(calls_.size());
  for (const Call& c : calls_) {
    CommEvent& e = out.emplace_back();
    e.op = comm_names_[c.op];
    e.group = comm_names_[c.group];
    e.dtype = comm_names_[c.dtype];
    e.bytes = c.bytes;
    e.group_size = c.group_size;
    e.peer = c.peer;
    e.seq = c.seq;
    e.async = c.async;
    e.emulated = c.emulated;
    e.step = c.step;
    e.micro = c.micro;
    e.t_issue_ns = c.t_issue_ns;
    e.t_wait_begin_ns = c.t_wait_begin_ns;
    e.t_complete_ns = c.t_complete_ns;
    e.t_wait_end_ns = c.t_wait_end_ns;
  }
  return out;
}

void RankEventLog::restore(std::vector<CommEvent> events, std::vector<HostSpan> spans,
                           std::vector<MemorySample> memory) {
  std::lock_guard<SpinLock> lock(mutex_);
  calls_.clear();
  for (const CommEvent& e : events) {
    append_locked(e, e.step, e.micro);
    Call& c = calls_.back();
    c.t_wait_begin_ns = e.t_wait_begin_ns;
    c.t_complete_ns = e.t_complete_ns;
    c.t_wait_end_ns = e.t_wait_end_ns;
  }
  spans_.clear();
  spans_.reserve(spans.size());
  for (const HostSpan& s : spans) {
    spans_.push_back({intern_locked(s.name), s.category, s.micro, s.step, s.t0_ns, s.t1_ns, -1, 0});
    spans_.back().off_cpu_us = s.off_cpu_us;
  }
  memory_ = std::move(memory);
}

std::vector<HostSpan> RankEventLog::spans() const {
  std::lock_guard<SpinLock> lock(mutex_);
  std::vector<HostSpan> out;
  out.reserve(spans_.size());
  for (const Span& s : spans_)
    out.push_back({names_[s.name], s.category, s.t0_ns, s.t1_ns, s.step, s.micro, s.off_cpu_us});
  return out;
}

std::vector<MemorySample> RankEventLog::memory() const {
  std::lock_guard<SpinLock> lock(mutex_);
  return memory_;
}

size_t RankEventLog::size() const {
  std::lock_guard<SpinLock> lock(mutex_);
  return calls_.size();
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
