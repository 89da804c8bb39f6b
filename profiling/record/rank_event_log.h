#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "profiling/record/spin_lock.h"
#include "profiling/trace/comm_event.h"
#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// A phase of a rank's host thread: a step, a micro-batch, a unit's forward or backward, ...
struct HostSpan {
  std::string name;
  Category category = Category::kOther;
  int64_t t0_ns = 0;
  int64_t t1_ns = 0;  // 0 while open
  int32_t step = -1;
  int16_t micro = -1;
  // Of the span, the microseconds its thread was off its core (wall time less the thread's CPU
  // time): a busy machine's preemption, or a wait. Measured only on threads that compute alone
  // (RankEventLog::measure_cpu_time_on_this_thread); 0 where not measured.
  int32_t off_cpu_us = 0;
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
  explicit RankEventLog(int rank) : rank_(rank) { calls_.reserve(kCallsReserved); }

  int rank() const { return rank_; }

  // Where the rank is in training; stamped on everything recorded after it.
  void set_position(int step, int micro);

  // Returns the index used to stamp the event later.
  size_t append(const CommCall& call);
  void stamp_complete(size_t index, int64_t t_ns);
  void stamp_wait_begin(size_t index, int64_t t_ns);
  void stamp_wait_end(size_t index, int64_t t_ns);
  void mark_blocking(size_t index);

  // Spans begun on the calling thread from now on also measure its CPU time (off_cpu_us). For a
  // thread whose compute runs on itself alone (one intra-op thread): there, what the thread did
  // not run is time the machine took from it, which a device of its own would not have.
  static void measure_cpu_time_on_this_thread(bool on);

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
    int64_t cpu0_ns = -1;  // the beginning thread's CPU time, when it measures it
    uint32_t thread = 0;   // which thread began it (its CPU time is only its own)
    int32_t off_cpu_us = 0;
  };

  // A CommEvent with its names interned: 72 bytes to copy when the vector grows, and no
  // allocation while the lock is held but at a doubling (a deque's chunk per few calls, under the
  // lock that a backend's completion stamp spins on, cost a 2-core machine's compute measurably).
  struct Call {
    uint16_t op = 0;
    uint16_t group = 0;
    uint16_t dtype = 0;
    bool async = false;
    bool emulated = false;
    int32_t group_size = 0;
    int32_t peer = -1;
    int32_t step = -1;
    int16_t micro = -1;
    uint64_t seq = 0;
    int64_t bytes = 0;
    int64_t t_issue_ns = 0;
    int64_t t_wait_begin_ns = 0;
    int64_t t_complete_ns = 0;
    int64_t t_wait_end_ns = 0;
  };

  // A tiny step's calls for a few hundred steps, reserved before the rank runs.
  static constexpr size_t kCallsReserved = 4096;

  uint32_t intern_locked(std::string_view name);
  // The few names of communication calls (ops, groups, dtypes): found by a short scan, which
  // beats hashing the string.
  uint16_t intern_comm_locked(std::string_view name);
  void append_locked(const CommCall& call, int32_t step, int16_t micro);

  int rank_;
  mutable SpinLock mutex_;
  int32_t step_ = -1;
  int16_t micro_ = -1;
  std::vector<Call> calls_;
  std::deque<std::string> comm_names_;
  std::vector<std::string_view> comm_name_views_;
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
