// The GUI at a million events: the CPU time to build a timeline frame at several zoom levels,
// and the time to open a trace file (read, parse, index for drawing) in each format.
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "app/analysis/trace_open.h"
#include "app/perf/perf_suite.h"
#include "app/perf/synthetic_trace.h"
#include "app/perf/timeline_frames.h"
#include "profiling/io/trace_io.h"

namespace shardscope::perf {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double load_seconds(const profiling::Trace& trace, const std::string& path, int repeats) {
  std::ofstream(path, std::ios::binary) << profiling::serialise_trace(trace, path);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    profiling::Trace t = profiling::read_trace_file(path);
    gui::TimelineIndex index = gui::build_timeline_index(t);
    times.push_back(seconds_since(t0));
  }
  ::unlink(path.c_str());
  return median(times);
}

// Frames of `trace` at several zoom levels, one row each.
void frame_rows(const profiling::Trace& trace, const std::string& what, int repeats,
                std::vector<PerfRow>& rows) {
  TimelineFrames frames(trace);
  for (double fraction : {1.0, 1e-1, 1e-2, 1e-4, 1e-6}) {
    frames.draw(fraction);  // warm-up
    std::vector<double> times;
    for (int i = 0; i < repeats; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      frames.draw(fraction);
      times.push_back(seconds_since(t0));
    }
    PerfRow row;
    row.section = "gui";
    char text[256];
    std::snprintf(text, sizeof(text), "timeline frame, %s, %g of the trace visible", what.c_str(),
                  fraction);
    row.what = text;
    row.ours = row.ratio = median(times) * 1e3;
    row.unit = "ms";
    row.target = "<= 8 ms";
    row.met = row.ours <= 8;
    const auto state = frames.view().state(trace, frames.index());
    row.note = std::to_string(state["drawn_marks"].get<int>()) + " marks (" +
               std::to_string(state["folded_marks"].get<int>()) + " folds), " +
               std::to_string(frames.vertices()) + " vertices";
    rows.push_back(row);
  }
}

// A trace the user names: opened as the app opens it (read, parse, index), then drawn.
void measure_given_trace(const PerfOptions& options, std::vector<PerfRow>& rows) {
  if (options.progress) options.progress("  opening " + options.trace);
  const auto t0 = std::chrono::steady_clock::now();
  const profiling::Trace trace = analysis::open_trace_path(options.trace);
  gui::TimelineIndex index = gui::build_timeline_index(trace);
  PerfRow open;
  open.section = "gui";
  size_t events = 0;
  for (const auto& r : trace.ranks) events += r.events.size();
  open.what = "open " + options.trace + " (read, parse, index)";
  open.ours = open.ratio = seconds_since(t0);
  open.unit = "s";
  open.target = "<= 5 s";
  open.met = open.ours <= 5.0;
  open.note = std::to_string(trace.ranks.size()) + " ranks, " + std::to_string(events) + " events";
  rows.push_back(open);
  frame_rows(trace, std::to_string(trace.ranks.size()) + " ranks", options.quick ? 10 : 50, rows);
}

}  // namespace

void measure_gui(const PerfOptions& options, std::vector<PerfRow>& rows) {
  if (!options.trace.empty()) {
    measure_given_trace(options, rows);
    return;
  }
  const size_t events = 1'000'000;
  if (options.progress) options.progress("  a synthetic trace of 1 M events over 8 ranks");
  const profiling::Trace trace = synthetic_trace(events);
  frame_rows(trace, "1 M events", options.quick ? 20 : 100, rows);
  if (options.progress) options.progress("  opening a 1 M-event trace, native and JSON");
  const std::string dir = "/tmp/shardscope-perf-" + std::to_string(::getpid());
  PerfRow native;
  native.section = "gui";
  native.what = "open a 1 M-event trace: native (read, parse, index)";
  native.ours = native.ratio = load_seconds(trace, dir + ".sst", options.quick ? 1 : 3);
  native.unit = "s";
  native.target = "<= 1 s";
  native.met = native.ours <= 1.0;
  rows.push_back(native);
  PerfRow json = native;
  json.what = "open a 1 M-event trace: Chrome JSON (read, parse, index)";
  json.ours = json.ratio = load_seconds(trace, dir + ".json", 1);
  json.target = "<= 2 s";
  json.met = json.ours <= 2.0;
  rows.push_back(json);
}

}  // namespace shardscope::perf
