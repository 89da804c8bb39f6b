// The GUI at the scale it must handle: a million events over 8 ranks. Measures the CPU time to
// build one timeline frame (layout, ImGui draw lists; no GPU or driver) at several zoom levels,
// and the time to load a trace (read and parse the file, then index it for drawing) in each
// format. Run: build/tests/gui_benchmark
#include <benchmark/benchmark.h>
#include <imgui.h>

#include <cstdio>
#include <fstream>

#include "app/gui/timeline_index.h"
#include "app/gui/timeline_view.h"
#include "profiling/trace_io.h"
#include "tests/support/synthetic_trace.h"

namespace shardscope::gui {
namespace {

const profiling::Trace& million() {
  static const profiling::Trace t = test::synthetic_trace(1'000'000);
  return t;
}

const TimelineIndex& million_index() {
  static const TimelineIndex index = build_timeline_index(million());
  return index;
}

struct HeadlessImGui {
  HeadlessImGui() {
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    io.DisplaySize = ImVec2(1600, 900);
    io.DeltaTime = 1.0f / 60;
    // As the OpenGL 3 backend declares: draw lists may pass 64k vertices (16-bit indices).
    io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;
    unsigned char* pixels = nullptr;
    int w = 0, h = 0;
    io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);
  }
  ~HeadlessImGui() { ImGui::DestroyContext(); }
};

// Visible span as a fraction of the whole trace: 1 (everything), down to a few microseconds.
void BM_TimelineFrame(benchmark::State& state) {
  HeadlessImGui imgui;
  const auto& trace = million();
  const auto& index = million_index();
  const double total_ms = (index.t_max - index.t_min) * 1e-6;
  const double fraction = 1.0 / static_cast<double>(state.range(0));
  TimelineView view;
  int64_t vertices = 0;
  for (auto _ : state) {
    view.request_range(total_ms * 0.4, total_ms * 0.4 + total_ms * fraction);
    if (fraction == 1.0) view.request_range(0, total_ms);
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(1600, 900));
    ImGui::Begin("timeline", nullptr, ImGuiWindowFlags_NoDecoration);
    view.draw(trace, index);
    ImGui::End();
    ImGui::Render();
    vertices = ImGui::GetDrawData()->TotalVtxCount;
  }
  const auto s = view.state(trace, index);
  state.counters["visible_ms"] =
      s["visible_ms"][1].get<double>() - s["visible_ms"][0].get<double>();
  state.counters["marks"] = s["drawn_marks"].get<double>();
  state.counters["folds"] = s["folded_marks"].get<double>();
  state.counters["vertices"] = static_cast<double>(vertices);
}
BENCHMARK(BM_TimelineFrame)
    ->Arg(1)
    ->Arg(10)
    ->Arg(100)
    ->Arg(10'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond);

std::string written(const char* path) {
  std::ofstream(path, std::ios::binary) << profiling::serialise_trace(million(), path);
  return path;
}

// What opening a file costs the GUI: read and parse, then the drawing index.
void load(benchmark::State& state, const std::string& path) {
  for (auto _ : state) {
    profiling::Trace t = profiling::read_trace_file(path);
    TimelineIndex index = build_timeline_index(t);
    benchmark::DoNotOptimize(index.rows.data());
  }
  state.counters["events"] = static_cast<double>(million().event_count());
}

void BM_LoadNative(benchmark::State& state) {
  static const std::string path = written("/tmp/shardscope-gui-benchmark.sst");
  load(state, path);
}
BENCHMARK(BM_LoadNative)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_LoadJson(benchmark::State& state) {
  static const std::string path = written("/tmp/shardscope-gui-benchmark.json");
  load(state, path);
}
BENCHMARK(BM_LoadJson)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_IndexOnly(benchmark::State& state) {
  for (auto _ : state) {
    TimelineIndex index = build_timeline_index(million());
    benchmark::DoNotOptimize(index.rows.data());
  }
}
BENCHMARK(BM_IndexOnly)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace shardscope::gui

BENCHMARK_MAIN();
