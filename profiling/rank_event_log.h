#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "profiling/comm_event.h"
#include "profiling/spin_lock.h"
#include "profiling/trace.h"

namespace shardscope::profiling {

// A phase of a rank's host thread: a step, a micro-batch, a unit's forward or backward, ...
struct HostSpan {
  std::string name;
  Category category = Category::kOther;
  int64_t t0_ns = 0;
  int64_t t1_ns = 0;  // 0 while open
  int32_t step = -1;
  int16_t micro = -1;
};

struct MemorySample {
  int64_t t_ns = 0;
  MemoryKind kind = MemoryKind::kOther;
  int64_t bytes = 0;
};

// Append-only record of one rank: its communication calls, host spans and memory samples.
// Backends complete async work on their own threads, so completion stamps arrive concurrently
// with new records; the lock is per rank and therefore never contended between ranks. Recording
// is on the hot path of a traced rank (see tests/benchmarks/tracing_benchmark.cpp), so a span
// costs no allocation: its name is interned, once per distinct name and log.
class RankEventLog {
 public:
  explicit RankEventLog(int rank) : rank_(rank) {}

  int rank() const { return rank_; }

  // Where the rank is in training; stamped on everything recorded after it.
  void set_position(int step, int micro);

  // Returns the index used to stamp the event later.
  size_t append(CommEvent event);
  void stamp_complete(size_t index, int64_t t_ns);
  void stamp_wait_begin(size_t index, int64_t t_ns);
  void stamp_wait_end(size_t index, int64_t t_ns);
  void mark_blocking(size_t index);

  size_t begin_span(std::string_view name, Category category);
  void end_span(size_t index);
  void add_memory(MemoryKind kind, int64_t bytes);
  void add_memory_at(int64_t t_ns, MemoryKind kind, int64_t bytes);

  // Replaces the record with one read back from elsewhere (a rank process's result file).
  void restore(std::vector<CommEvent> events, std::vector<HostSpan> spans,
               std::vector<MemorySample> memory);

  std::vector<CommEvent> snapshot() const;
  std::vector<HostSpan> spans() const;
  std::vector<MemorySample> memory() const;
  size_t size() const;  // communication calls

 private:
  // A HostSpan with its name interned.
  struct Span {
    uint32_t name = 0;
    Category category = Category::kOther;
    int16_t micro = -1;
    int32_t step = -1;
    int64_t t0_ns = 0;
    int64_t t1_ns = 0;
  };

  uint32_t intern_locked(std::string_view name);

  int rank_;
  mutable SpinLock mutex_;
  int32_t step_ = -1;
  int16_t micro_ = -1;
  std::vector<CommEvent> events_;
  std::vector<Span> spans_;
  std::vector<MemorySample> memory_;
  // Span names by id; a deque, so that the views keying `name_ids_` stay where they point.
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, uint32_t> name_ids_;
};

// The breakdown RankMemoryTracker::log_peak appended: the categories logged at the moment of the
// last allocation sample that is followed by all of them at its own time (false: none logged).
bool logged_peak(const std::vector<MemorySample>& samples, MemoryCategories* out);

}  // namespace shardscope::profiling
