// What tracing costs per recorded event, on the paths a traced rank takes: a host span (as the
// trainer and model open them), a communication call (as Comm records and stamps it), a memory
// sample, and the allocator hook that every allocation of a traced rank goes through.
// Each log lives for many iterations, as a rank's does for a run, so growth is amortised as it
// is there. Run: build/tests/tracing_benchmark
#include <benchmark/benchmark.h>

#include <string>

#include <ATen/ATen.h>

#include "profiling/record/clock.h"
#include "profiling/record/host_tracing.h"
#include "profiling/record/memory_tracker.h"
#include "profiling/record/rank_event_log.h"

namespace shardscope::profiling {
namespace {

// The log is emptied every so many events, so a run of millions of iterations measures the steady
// state of a rank's log rather than one vector of millions of records.
constexpr int64_t kEventsPerLog = 1 << 16;

void keep_small(benchmark::State& state, RankEventLog& log, int64_t events) {
  if (events % kEventsPerLog != 0) return;
  state.PauseTiming();
  log.restore({}, {}, {});
  state.ResumeTiming();
}

// One host span, opened and closed: the name is one the model builds ("forward blocks.N").
void BM_HostSpan(benchmark::State& state) {
  RankEventLog log(0);
  RankLogScope scope(&log);
  int64_t n = 0;
  for (auto _ : state) {
    ScopedSpan span(Category::kForward, "forward blocks.1");
    keep_small(state, log, ++n);
  }
}

// The same on a rank thread that computes alone, which also reads its CPU time twice.
void BM_HostSpanMeasuringCpuTime(benchmark::State& state) {
  RankEventLog log(0);
  RankLogScope scope(&log);
  RankEventLog::measure_cpu_time_on_this_thread(true);
  int64_t n = 0;
  for (auto _ : state) {
    ScopedSpan span(Category::kForward, "forward blocks.1");
    keep_small(state, log, ++n);
  }
  RankEventLog::measure_cpu_time_on_this_thread(false);
}

// One collective as Comm records it: the call with its op, group and dtype, then the
// backend's completion and the caller's wait.
void BM_CollectiveRecord(benchmark::State& state) {
  RankEventLog log(0);
  const std::string group = "world";  // a Comm's group name lives as long as the Comm
  int64_t n = 0;
  for (auto _ : state) {
    CommCall event;
    event.op = "all_reduce";
    event.group = group;
    event.dtype = "Float";
    event.bytes = 4096;
    event.group_size = 2;
    event.seq = static_cast<uint64_t>(n);
    event.async = true;
    event.t_issue_ns = now_ns();
    const size_t index = log.append(event);
    log.stamp_complete(index, now_ns());
    log.stamp_wait_begin(index, now_ns());
    log.stamp_wait_end(index, now_ns());
    keep_small(state, log, ++n);
  }
}

// One memory counter sample (the tracker writes seven at a time: allocated and each category).
void BM_MemorySample(benchmark::State& state) {
  RankEventLog log(0);
  int64_t n = 0;
  for (auto _ : state) {
    log.add_memory(MemoryKind::kActivations, n);
    keep_small(state, log, ++n);
  }
}

// The tracker's own bookkeeping for one allocation and its free, as the hook calls it from the
// rank's thread, with a few hundred other blocks live (as in a tiny model's step).
void BM_AllocationHook(benchmark::State& state) {
  RankEventLog log(0);
  RankMemoryTracker tracker(0, &log);
  static char blocks[512];
  for (int i = 0; i < 256; ++i)
    tracker.record(&blocks[i], 64, false, RankMemoryTracker::Context::kOutsideBackward);
  int i = 0;
  for (auto _ : state) {
    void* ptr = &blocks[256 + (i++ & 255)];
    tracker.record(ptr, 256, false, RankMemoryTracker::Context::kOutsideBackward);
    tracker.record(ptr, -256, false, RankMemoryTracker::Context::kOutsideBackward);
  }
}

// A small CPU tensor allocated and freed on a thread whose allocations a rank tracks, against
// the same without tracking: the difference is the whole hook path (c10's and ours).
void BM_TensorTracked(benchmark::State& state) {
  RankEventLog log(0);
  RankMemoryTracker tracker(0, &log);
  RankMemoryTracker::ThreadScope scope(state.range(0) != 0 ? &tracker : nullptr);
  for (auto _ : state) benchmark::DoNotOptimize(at::empty({16}));
}

// One read of the clock every recorded event stamps (a collective takes four).
void BM_ClockRead(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(now_ns());
}

BENCHMARK(BM_ClockRead);
BENCHMARK(BM_HostSpan);
BENCHMARK(BM_HostSpanMeasuringCpuTime);
BENCHMARK(BM_CollectiveRecord);
BENCHMARK(BM_MemorySample);
BENCHMARK(BM_AllocationHook);
BENCHMARK(BM_TensorTracked)->ArgName("tracked")->Arg(0)->Arg(1);

}  // namespace
}  // namespace shardscope::profiling

BENCHMARK_MAIN();
