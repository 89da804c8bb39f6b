// Trace I/O at the scale the GUI must handle: a million events over 8 ranks, written and read
// in both formats. Reports bytes per file as a counter. Run: build/tests/trace_io_benchmark
#include <benchmark/benchmark.h>

#include "profiling/trace_io.h"

namespace shardscope::profiling {
namespace {

Trace synthetic_trace(size_t events) {
  Trace t;
  const int ranks = 8;
  const char* names[] = {"forward blocks.0", "backward blocks.0", "all_reduce", "wait all_reduce",
                         "optimizer step"};
  const Category categories[] = {Category::kForward, Category::kBackward, Category::kCollective,
                                 Category::kWait, Category::kOptimizer};
  for (int r = 0; r < ranks; ++r) {
    RankTrace rank;
    rank.rank = r;
    rank.lanes = {"host", "comm"};
    const size_t n = events / ranks;
    int64_t t0 = 1'000'000'000;
    for (size_t i = 0; i < n; ++i) {
      Event e;
      const int kind = static_cast<int>(i % 5);
      e.name = t.intern(names[kind]);
      e.category = categories[kind];
      e.lane = e.category == Category::kCollective ? kCommLane : kHostLane;
      e.t0_ns = t0;
      e.t1_ns = t0 + 800;
      e.step = static_cast<int32_t>(i / 500);
      e.seq = e.category == Category::kCollective ? static_cast<int64_t>(i) : -1;
      e.bytes = e.category == Category::kCollective ? 1 << 20 : 0;
      e.group = t.intern("world");
      t0 += 1000;
      rank.events.push_back(e);
    }
    t.ranks.push_back(std::move(rank));
  }
  t.normalise();
  return t;
}

const Trace& million() {
  static const Trace t = synthetic_trace(1'000'000);
  return t;
}

void BM_WriteNative(benchmark::State& state) {
  size_t bytes = 0;
  for (auto _ : state) bytes = to_native(million()).size();
  state.counters["MB"] = bytes / 1e6;
}

void BM_ReadNative(benchmark::State& state) {
  const std::string file = to_native(million());
  for (auto _ : state) benchmark::DoNotOptimize(from_native(file));
  state.counters["MB"] = file.size() / 1e6;
}

void BM_WriteChromeJson(benchmark::State& state) {
  size_t bytes = 0;
  for (auto _ : state) bytes = to_chrome_json(million()).size();
  state.counters["MB"] = bytes / 1e6;
}

void BM_ReadChromeJson(benchmark::State& state) {
  const std::string file = to_chrome_json(million());
  for (auto _ : state) benchmark::DoNotOptimize(from_chrome_json(file));
  state.counters["MB"] = file.size() / 1e6;
}

BENCHMARK(BM_WriteNative)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_ReadNative)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_WriteChromeJson)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_ReadChromeJson)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace shardscope::profiling

BENCHMARK_MAIN();
