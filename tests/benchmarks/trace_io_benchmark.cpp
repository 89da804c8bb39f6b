// Trace I/O at the scale the GUI must handle: a million events over 8 ranks, written and read
// in both formats. Reports bytes per file as a counter. Run: build/tests/trace_io_benchmark
#include <benchmark/benchmark.h>

#include "app/perf/synthetic_trace.h"
#include "profiling/io/trace_io.h"

namespace shardscope::profiling {
namespace {

const Trace& million() {
  static const Trace t = perf::synthetic_trace(1'000'000);
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
