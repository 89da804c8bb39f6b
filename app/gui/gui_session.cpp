#include "app/gui/gui_session.h"

#include <algorithm>
#include <exception>

#include "app/analysis/trace_figures.h"
#include "app/analysis/trace_open.h"
#include "app/analysis/trace_projection.h"
#include "app/gui/gui_style.h"
#include "engine/state/atomic_file.h"
#include "profiling/io/trace_io.h"

namespace shardscope::gui {

std::vector<std::string> split_paths(const std::string& text) {
  std::vector<std::string> paths;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    std::string part = text.substr(start, end - start);
    const size_t first = part.find_first_not_of(" \t");
    const size_t last = part.find_last_not_of(" \t");
    if (first != std::string::npos) paths.push_back(part.substr(first, last - first + 1));
    start = end + 1;
  }
  return paths;
}

std::string job_label(const std::vector<std::string>& paths) {
  if (paths.empty()) return "";
  if (paths.size() == 1) return paths[0];
  return paths[0] + " and " + std::to_string(paths.size() - 1) + " more";
}

std::unique_ptr<LoadedRun> make_loaded_run(profiling::Trace trace, const std::string& source) {
  auto run = std::make_unique<LoadedRun>();
  run->source = source;
  run->trace = std::move(trace);
  run->index = build_timeline_index(run->trace);
  run->row = analysis::comparison_row(run->trace);
  if (const auto pipeline = analysis::pipeline_of_run(run->trace.run))
    run->bubble_formula = pipeline->formula;
  for (const auto& rank : run->trace.ranks) run->memory_peaks.push_back(peak_breakdown(rank));
  const size_t slash = source.find_last_of('/');
  if (source != "launched") run->origin = source.substr(slash == std::string::npos ? 0 : slash + 1);
  run->label = analysis::run_label(run->row.attributes, {});
  if (run->label == "trace" && !run->origin.empty()) run->label += " (" + run->origin + ")";
  return run;
}

void GuiSession::relabel() {
  std::vector<analysis::RunAttributes> attributes;
  for (const auto& r : runs) attributes.push_back(r->row.attributes);
  const std::vector<std::string> labels = analysis::run_labels(attributes);
  for (size_t i = 0; i < runs.size(); ++i) {
    LoadedRun& run = *runs[i];
    run.label = labels[i];
    const bool launched = run.source == "launched";
    const bool same = std::count(labels.begin(), labels.end(), labels[i]) > 1;
    if (!run.origin.empty() && (launched || same || !run.row.attributes.known)) {
      run.label += launched ? " " + run.origin : " (" + run.origin + ")";
    }
  }
}

ShownRun GuiSession::shown(LoadedRun& run) {
  ShownRun out;
  out.trace = &run.trace;
  out.index = &run.index;
  out.row = &run.row;
  out.title = "measured wall clock";
  if (lens.measured) return out;
  if (run.live) {
    out.note = "device time once the run has ended";
    return out;
  }
  const std::string key = lens.hardware + "|" + std::to_string(lens.compute_scale);
  if (!run.lensed || run.lensed->lens_key != key) {
    auto lensed = std::make_unique<LoadedRun::Lensed>();
    lensed->lens_key = key;
    try {
      lensed->view = analysis::apply_lens(run.trace, lens);
    } catch (const std::exception& e) {
      lensed->view.trace = run.trace;
      lensed->view.title = "measured wall clock";
      lensed->view.note = std::string("device time unavailable: ") + e.what();
    }
    lensed->index = build_timeline_index(lensed->view.trace);
    lensed->row = analysis::comparison_row(lensed->view.trace);
    if (lensed->view.device_time) {
      analysis::time_row(lensed->view.trace, lensed->row);
      lensed->row.lens = "device time on " + lensed->view.hardware;
      lensed->row.attributes.lens = lensed->row.lens;
    }
    run.lensed = std::move(lensed);
  }
  out.trace = &run.lensed->view.trace;
  out.index = &run.lensed->index;
  out.row = &run.lensed->row;
  out.device_time = run.lensed->view.device_time;
  out.title = run.lensed->view.title;
  out.note = run.lensed->view.note;
  return out;
}

void GuiSession::set_lens(const analysis::Lens& next) {
  lens = next;
  timeline.reset();  // same events, other times: the old window frames nothing in particular
}

int GuiSession::add_run(std::unique_ptr<LoadedRun> run) {
  runs.push_back(std::move(run));
  relabel();
  select_run(static_cast<int>(runs.size()) - 1);
  return current;
}

void GuiSession::select_run(int index) {
  if (index < 0 || index >= static_cast<int>(runs.size()) || index == current) return;
  current = index;
  timeline.reset();
  what_if.projected.reset();
  what_if.summary.clear();
  what_if.error.clear();
}

void GuiSession::replace_run(int index, std::unique_ptr<LoadedRun> run) {
  runs[index] = std::move(run);
  relabel();
  if (index == current) {
    // Event indices of the old trace mean nothing in the new one.
    timeline.reset();
    what_if.projected.reset();
    what_if.figures = nullptr;
  }
}

void GuiSession::change_text_scale(float by) {
  text_scale = std::clamp(text_scale + by, kMinTextScale, kMaxTextScale);
  message = "text size " + std::to_string(int(std::lround(text_scale * 100))) + " %";
}

bool GuiSession::open_trace(const std::string& path) {
  try {
    // "a.json; b.json": one job's profiler files, one a rank, read as one run.
    const std::vector<std::string> paths = split_paths(path);
    if (paths.size() > 1) {
      add_run(make_loaded_run(analysis::open_trace_paths(paths), job_label(paths)));
      message = "opened " + job_label(paths);
      return true;
    }
    add_run(make_loaded_run(analysis::open_trace_path(path), path));
    message = "opened " + path;
    return true;
  } catch (const std::exception& e) {
    // The reader's message names the path and says what it is instead of a trace.
    message = std::string("cannot open: ") + e.what();
    return false;
  }
}

bool GuiSession::save_trace(const std::string& path) {
  const LoadedRun* run = runs.empty() || current < 0 ? nullptr : runs[current].get();
  if (run == nullptr) {
    message = "nothing to save: open or run something first";
    return false;
  }
  try {
    write_file_atomically(path, profiling::serialise_trace(run->trace, path));
    message = "saved " + path;
    return true;
  } catch (const std::exception& e) {
    message = "cannot save " + path + ": " + e.what();
    return false;
  }
}

nlohmann::json GuiSession::state() const {
  nlohmann::json s;
  s["tab"] = tab;
  s["text_scale"] = text_scale;
  s["font_px"] = kBaseFontPx * display_scale * text_scale;
  s["message"] = message;
  s["current"] = current;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : runs) {
    list.push_back({{"label", r->label},
                    {"ranks", r->trace.ranks.size()},
                    {"events", r->trace.event_count()},
                    {"ok", r->row.ok}});
  }
  s["runs"] = list;
  if (current >= 0) {
    ShownRun view = const_cast<GuiSession*>(this)->shown(*runs[current]);
    s["timeline"] = timeline.state(*view.trace, *view.index);
    s["lens"] = {{"title", view.title}, {"device_time", view.device_time}, {"note", view.note}};
    // The Memory tab's bars: each rank at its peak, by category, in bytes.
    nlohmann::json peaks = nlohmann::json::array();
    const LoadedRun& run = *runs[current];
    for (size_t r = 0; r < run.memory_peaks.size(); ++r) {
      const MemoryBreakdown& peak = run.memory_peaks[r];
      nlohmann::json bytes = nlohmann::json::object();
      for (int k = 0; k < profiling::kMemoryKindCount; ++k)
        bytes[profiling::memory_kind_name(static_cast<profiling::MemoryKind>(k))] = peak.bytes[k];
      if (r < run.trace.ranks.size())
        bytes["moment"] = peak_moment(run.trace, run.trace.ranks[r], peak.t_ns);
      peaks.push_back(bytes);
    }
    s["memory_peaks"] = peaks;
  }
  nlohmann::json launches = nlohmann::json::array();
  for (const auto& p : launches_progress_snapshot) launches.push_back(p);
  s["launches"] = launches;
  s["what_if"] = what_if.figures;
  s["what_if_error"] = what_if.error;
  s["experts"] = experts.figures;
  s["launch_errors"] = launch_errors;
  s["launch_fields"] = launch_fields;
  s["launch_projection"] = {{"text", launch_projection.text}, {"error", launch_projection.error}};
  s["launch_warnings"] = launch_warnings;
  s["live_run"] = live_index;
  s["live_rank_steps"] = live_rank_steps;
  return s;
}

}  // namespace shardscope::gui
