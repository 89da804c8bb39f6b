#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/analysis/comparison_table.h"
#include "app/analysis/device_time_lens.h"
#include "app/gui/launch_queue.h"
#include "app/gui/memory_breakdown.h"
#include "app/gui/timeline_index.h"
#include "app/gui/timeline_view.h"
#include "profiling/trace/trace.h"

namespace shardscope::gui {

// A run the GUI shows: a trace loaded from a file, or one a queued launch produced. Everything
// a window needs that is costly to derive is derived once, here.
struct LoadedRun {
  // What sets it apart from the other runs loaded (GuiSession::relabel), e.g. "zero2 w4, bf16".
  std::string label;
  std::string source;  // the file it came from, or "launched"
  // Where it came from, shown after the label for launched runs ("#3", "running #3") and for
  // files whose labels would otherwise be the same (the file's name).
  std::string origin;
  profiling::Trace trace;
  TimelineIndex index;
  analysis::ComparisonRow row;
  std::vector<MemoryBreakdown> memory_peaks;  // per rank: what it held at its peak
  bool live = false;                          // a snapshot of a run still going: no result yet
  double bubble_formula = -1;  // a pipeline run's (p - 1) / (m + p - 1); -1 for other runs
  // The run through the session's lens (device time), made when first shown under that lens.
  struct Lensed {
    std::string lens_key;
    analysis::LensedTrace view;
    TimelineIndex index;
    analysis::ComparisonRow row;
  };
  std::unique_ptr<Lensed> lensed;
};
std::unique_ptr<LoadedRun> make_loaded_run(profiling::Trace trace, const std::string& source);
// The paths of the Open dialog's "a.json; b.json" (one job's files), trimmed, empty ones dropped.
std::vector<std::string> split_paths(const std::string& text);
// How a run read from several files is named: "a.json and 3 more".
std::string job_label(const std::vector<std::string>& paths);

struct WhatIfState {
  int hardware = 0;  // index into hardware_names
  std::vector<std::string> hardware_names;
  float compute_scale = 0;  // 0: from the calibrated this-machine profile
  // The kernels are priced in fp32 (the GPU's measured fp32 rates) instead of bf16, as GPUs
  // train, whatever the run computed in.
  bool price_fp32 = false;
  std::string error;
  bool project_requested = false;  // a script asked; done on the next What-if frame
  std::unique_ptr<LoadedRun> projected;
  std::string summary;  // the figures, as shown
  nlohmann::json figures;
  TimelineView timeline;
};

// What a view draws of a run: the measured recording or its device-time replay (same events,
// same lanes: an event picked in one is the same event in the other).
struct ShownRun {
  const profiling::Trace* trace = nullptr;
  const TimelineIndex* index = nullptr;
  const analysis::ComparisonRow* row = nullptr;
  bool device_time = false;
  std::string title;  // what the picture is: its lens, hardware and compute scale
  std::string note;   // a caveat, or why device time is not shown
};

// Everything the app shows, and what tests inspect through `--state`.
struct GuiSession {
  // Device time by default: what N devices would do. `lens.measured`: the raw wall clock.
  analysis::Lens lens;
  ShownRun shown(LoadedRun& run);
  void set_lens(const analysis::Lens& next);
  std::vector<std::unique_ptr<LoadedRun>> runs;
  int current = -1;
  std::string tab = "Timeline";  // the tab shown
  // Text size: the display's own scale (a HiDPI monitor's content scale) times the user's setting
  // (View > Text size, Ctrl + / Ctrl -, Ctrl 0), so a lecture hall can read the 13 px default.
  float display_scale = 1.0f, text_scale = 1.0f;
  static constexpr float kMinTextScale = 1.0f, kMaxTextScale = 3.0f;
  void change_text_scale(float by);
  std::string requested_tab;  // a tab to switch to on the next frame
  TimelineView timeline;
  LaunchQueue launches;
  WhatIfState what_if;
  // The Experts tab: which step and layer it shows (-1: all of them, summed).
  struct ExpertsView {
    int step = -1, layer = -1;
    nlohmann::json figures;  // what it last showed (the GUI state reports it)
  } experts;
  // The Launch form: config keys as `shardscope run --config` takes them; validated every frame.
  nlohmann::json launch_form;
  std::string open_path;
  std::string save_path;
  std::string export_path = "comparison.md";
  nlohmann::json launch_errors = nlohmann::json::object();  // field -> why, in the Launch form
  // The Launch tab's projection of the form's configuration onto real GPUs, never run.
  struct LaunchProjection {
    std::vector<std::string> hardware_names;
    int hardware = 0, nodes = 1;
    bool requested = false;
    std::string text, error;  // the last projection, or why it could not be made
  } launch_projection;
  // field -> a warning that does not stop the run (one bucket leaves nothing to overlap)
  nlohmann::json launch_fields = nlohmann::json::array();  // keys the form shows, in order
  nlohmann::json launch_warnings = nlohmann::json::object();
  std::vector<nlohmann::json> launches_progress_snapshot;  // refreshed every frame
  std::string message;  // the last thing that went wrong or was done, shown in the status bar

  LoadedRun* current_run() { return current >= 0 ? runs[current].get() : nullptr; }
  // Adds a run and shows it; returns its index.
  int add_run(std::unique_ptr<LoadedRun> run);
  void select_run(int index);
  // Puts `run` in place of run `index` (a live run's newer snapshot, or its final trace).
  void replace_run(int index, std::unique_ptr<LoadedRun> run);
  // Names every run by what sets it apart from the others loaded (run_attributes.h); called
  // whenever the set of runs changes.
  void relabel();
  // The running launch's entry in `runs` and which launch it is (-1: none).
  int live_index = -1, live_id = -1;
  double live_refreshed = 0;
  std::vector<int> live_rank_steps;  // per rank of the running launch: the step it is in
  // Reads a trace file (native or Chrome JSON); false with `message` set when it cannot.
  bool open_trace(const std::string& path);
  bool save_trace(const std::string& path);
  nlohmann::json state() const;
};

}  // namespace shardscope::gui
