// The GUI at the scale it must handle, under Google Benchmark: the CPU time to build one
// timeline frame of a million events at several zoom levels, and opening a trace (read, parse,
// index) in each format. `shardscope perf --only gui` reports the same figures in its table.
// Run: build/tests/gui_benchmark
#include <benchmark/benchmark.h>

#include <fstream>

#include "app/gui/timeline_index.h"
#include "app/perf/synthetic_trace.h"
#include "app/perf/timeline_frames.h"
#include "profiling/io/trace_io.h"

namespace shardscope::perf {
namespace {

const profiling::Trace& million() {
  static const profiling::Trace t = synthetic_trace(1'000'000);
  return t;
}

// Visible span as a fraction of the whole trace: 1 (everything), down to a few microseconds.
void BM_TimelineFrame(benchmark::State& state) {
  TimelineFrames frames(million());
  const double fraction = 1.0 / static_cast<double>(state.range(0));
  for (auto _ : state) frames.draw(fraction);
  const auto s = frames.view().state(million(), frames.index());
  state.counters["marks"] = s["drawn_marks"].get<double>();
  state.counters["folds"] = s["folded_marks"].get<double>();
  state.counters["vertices"] = frames.vertices();
}
BENCHMARK(BM_TimelineFrame)
    ->Arg(1)
    ->Arg(10)
    ->Arg(100)
    ->Arg(10'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond);

void load(benchmark::State& state, const std::string& path) {
  std::ofstream(path, std::ios::binary) << profiling::serialise_trace(million(), path);
  for (auto _ : state) {
    profiling::Trace t = profiling::read_trace_file(path);
    gui::TimelineIndex index = gui::build_timeline_index(t);
    benchmark::DoNotOptimize(index.rows.data());
  }
}

void BM_OpenNative(benchmark::State& state) {
  load(state, "/tmp/shardscope-gui-benchmark.sst");
}
BENCHMARK(BM_OpenNative)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_OpenJson(benchmark::State& state) {
  load(state, "/tmp/shardscope-gui-benchmark.json");
}
BENCHMARK(BM_OpenJson)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_IndexOnly(benchmark::State& state) {
  for (auto _ : state) {
    gui::TimelineIndex index = gui::build_timeline_index(million());
    benchmark::DoNotOptimize(index.rows.data());
  }
}
BENCHMARK(BM_IndexOnly)->Unit(benchmark::kMillisecond)->Iterations(3);

// N spans on one lane that all overlap one another (a foreign trace that does not nest): each
// needs a row of its own. The packing walked every row for every span, quadratic (500,000 took
// two minutes to open: issue 33); it now keeps the free rows in a set.
void BM_IndexOverlapping(benchmark::State& state) {
  const int64_t n = state.range(0);
  profiling::Trace trace;
  profiling::RankTrace rank;
  rank.lanes = {"host"};
  for (int64_t i = 0; i < n; ++i) {
    profiling::Event e;
    e.t0_ns = i;
    e.t1_ns = 2 * n + i;
    e.lane = profiling::kHostLane;
    e.category = profiling::Category::kForward;
    rank.events.push_back(e);
  }
  trace.ranks.push_back(std::move(rank));
  trace.normalise();
  for (auto _ : state) {
    gui::TimelineIndex index = gui::build_timeline_index(trace);
    benchmark::DoNotOptimize(index.rows.data());
  }
  state.counters["rows"] = static_cast<double>(n);
}
BENCHMARK(BM_IndexOverlapping)
    ->Arg(125'000)
    ->Arg(250'000)
    ->Arg(500'000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace shardscope::perf

BENCHMARK_MAIN();
