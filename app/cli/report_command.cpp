#include "app/cli/report_command.h"
#include "app/analysis/median.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "app/analysis/device_time_lens.h"
#include "app/analysis/trace_figures.h"
#include "app/analysis/trace_open.h"
#include "app/analysis/trace_output.h"
#include "engine/train/config.h"
#include "profiling/io/trace_io.h"
#include "profiling/metrics/figure_text.h"
#include "profiling/metrics/step_figures.h"
#include "profiling/metrics/trace_metrics.h"
#include "profiling/trace/device_work.h"
#include "strategies/pipeline/pipeline_schedule.h"

namespace shardscope::cli {
namespace {

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

double ms(int64_t ns) {
  return ns * 1e-6;
}

// Replaces `trace` with its times through the options' lens, and says which times those are
// (unless JSON is asked for). False: a bad --hardware, said on `err`.
bool apply_report_lens(const ReportOptions& options, profiling::Trace* trace,
                       nlohmann::json* lens_json, std::ostream& out, std::ostream& err) {
  analysis::Lens lens;
  lens.measured = options.measured;
  lens.hardware = options.hardware;
  try {
    analysis::LensedTrace lensed = analysis::apply_lens(*trace, lens);
    *lens_json = {{"title", lensed.title}, {"device_time", lensed.device_time}};
    // The times below are the lens's; the header says which, and how to get the other.
    if (!options.json) {
      out << "times: " << lensed.title
          << (lensed.device_time ? " (--measured for the wall clock)" : "") << "\n";
      if (!lensed.note.empty()) out << "note: " << lensed.note << "\n";
    }
    *trace = std::move(lensed.trace);
  } catch (const std::exception& e) {
    err << "error: --hardware: " << e.what() << "\n";
    return false;
  }
  return true;
}

// The figures alone, through the same lens, for checks outside the GUI (trace_figures.h says
// what each is).
// Holistic Trace Analysis's figures of each rank (see print_hta_windows), as HTA names them:
// percentages of the window from the first kernel's start to the last one's end (null where
// there is nothing to divide by).
nlohmann::json hta_windows_json(const std::vector<profiling::WindowMetrics>& as_exported) {
  nlohmann::json out = nlohmann::json::array();
  auto pct = [](int64_t part, int64_t whole) {
    return whole > 0 ? nlohmann::json(100.0 * double(part) / double(whole)) : nlohmann::json();
  };
  for (const auto& w : as_exported) {
    out.push_back({{"rank", w.rank},
                   {"first_step", w.first_step},
                   {"last_step", w.last_step},
                   {"idle_pct", pct(w.idle_ns(), w.kernel_span_ns)},
                   {"compute_pct", pct(w.compute_ns, w.kernel_span_ns)},
                   {"non_compute_pct", pct(w.non_compute_ns(), w.kernel_span_ns)},
                   {"overlap_pct", pct(w.overlap_ns, w.comm_ns)}});
  }
  return out;
}

void print_figures_json(const profiling::Trace& trace, const std::string& path,
                        const nlohmann::json& lens_json,
                        const std::vector<profiling::WindowMetrics>& as_exported,
                        std::ostream& out) {
  const profiling::RunRecord& run = trace.run;
  nlohmann::json j = analysis::figures_json(trace);
  j["hta"] = hta_windows_json(as_exported);
  j["trace"] = path;
  j["lens"] = lens_json;
  if (!run.strategy.empty()) {
    j["strategy"] = run.strategy;
    j["world"] = run.world;
  }
  out << j.dump(2) << "\n";
}

void print_trace_header(const profiling::Trace& trace, const std::string& path, std::ostream& out) {
  const profiling::RunRecord& run = trace.run;
  out << "trace " << path << ": " << analysis::ranks_text(trace) << ", " << trace.event_count()
      << " events";
  if (!run.strategy.empty()) {
    out << "; " << run.strategy << ", world " << run.world << ", " << run.device << "/"
        << run.backend;
  }
  out << "\n";
  for (const auto& r : trace.ranks) {
    if (!r.failure.empty()) out << "rank " << r.rank << " FAILED: " << r.failure << "\n";
  }
}

// Medians over steps, leaving out step 0 (warm-up, one-off set-up) when there are others.
void print_step_medians(const profiling::Trace& trace, std::ostream& out) {
  std::map<int, std::vector<profiling::StepMetrics>> by_rank;
  for (const auto& m : profiling::step_metrics(trace)) by_rank[m.rank].push_back(m);
  out << "\nper rank, median over steps (ms):\n"
         "rank  steps  step    compute  comm    overlap  exposed  idle\n";
  for (auto& [rank, steps] : by_rank) {
    if (steps.size() > 1 && profiling::first_step_is_warm_up(trace)) steps.erase(steps.begin());
    auto med = [&](auto member) {
      std::vector<double> v;
      for (const auto& s : steps) v.push_back(member(s));
      return analysis::median(v);
    };
    out << std::string(4 - std::min<size_t>(4, std::to_string(rank).size()), ' ') << rank << "  "
        << steps.size() << "      " << fixed(med([](const auto& s) { return ms(s.span_ns); }), 1)
        << "  " << fixed(med([](const auto& s) { return ms(s.compute_ns); }), 1) << "  "
        << fixed(med([](const auto& s) { return ms(s.comm_ns); }), 1) << "  "
        << fixed(100 * med([](const auto& s) { return s.overlap_fraction(); }), 0) << " %  "
        << fixed(med([](const auto& s) { return ms(s.exposed_comm_ns); }), 1) << "  "
        << fixed(med([](const auto& s) { return ms(s.idle_ns); }), 1) << "\n";
  }
}

// The same run as Holistic Trace Analysis sees it in the Kineto export (`run --trace DIR/`):
// the measured steps as one window, device work only, percentages as HTA prints them, from the
// wall clock the export holds.
void print_hta_windows(const std::vector<profiling::WindowMetrics>& as_exported,
                       std::ostream& out) {
  out << "\nper rank, measured steps as one window, as Holistic Trace Analysis computes them "
         "from the export (wall clock):\n"
         "rank  steps  overlap %  idle %  compute %  non-compute %  (of first kernel start .. "
         "last kernel end)\n";
  for (const auto& w : as_exported) {
    auto pct = [](int64_t part, int64_t whole) {
      return whole > 0 ? fixed(100.0 * double(part) / double(whole), 2) : std::string("-");
    };
    out << std::string(4 - std::min<size_t>(4, std::to_string(w.rank).size()), ' ') << w.rank
        << "  " << w.first_step << "-" << w.last_step << "    " << pct(w.overlap_ns, w.comm_ns)
        << "  " << pct(w.idle_ns(), w.kernel_span_ns) << "  " << pct(w.compute_ns, w.kernel_span_ns)
        << "  " << pct(w.non_compute_ns(), w.kernel_span_ns) << "\n";
  }
}

// A pipeline's bubble: the part of its micro-batches' time a stage does not compute, against
// the textbook (p - 1) / (m + p - 1) of equal stages.
void print_pipeline_bubble(const profiling::Trace& trace, std::ostream& out) {
  const profiling::RunFigures figures = profiling::run_figures(trace);
  const auto pipeline = analysis::pipeline_of_run(trace.run);
  if (!pipeline) return;
  out << "\npipeline bubble (" << pipeline->stages << " stages, " << pipeline->micro_batches
      << " micro-batches, " << pipeline->schedule << "), median over steps:\n";
  for (const auto& f : figures.ranks) {
    out << "  rank " << f.rank;
    if (f.rank >= 0 && f.rank < static_cast<int>(pipeline->stages_held.size())) {
      const std::vector<int>& held = pipeline->stages_held[f.rank];
      out << (held.size() > 1 ? " (stages " : " (stage ");
      for (size_t i = 0; i < held.size(); ++i) out << (i > 0 ? ", " : "") << held[i];
      out << ")";
    }
    out << ": " << fixed(100 * f.bubble_fraction, 1) << " %";
    // Time in a receive (or send) before the other stage's call: counted here, not as exposed.
    if (f.peer_wait_s > 0)
      out << " (" << fixed(f.peer_wait_s * 1e3, 2)
          << " ms of it in communication waiting for the other stage)";
    out << "\n";
  }
  out << "  formula " << pipeline::bubble_formula_text(pipeline->schedule) << ": "
      << fixed(100 * pipeline->formula, 1) << " %\n";
  if (const auto passes = analysis::measured_passes(trace)) {
    out << "  the same schedule with this run's passes (forward "
        << fixed(passes->forward_s * 1e3, 2) << " ms, input " << fixed(passes->input_s * 1e3, 2)
        << " ms, weight " << fixed(passes->weight_s * 1e3, 2) << " ms; nothing else costing time): "
        << fixed(100 * analysis::bubble_with_measured_passes(*pipeline, *passes), 1) << " %\n";
  }
}

// Per collective op, over its calls matched across two or more ranks.
void print_collectives(const profiling::Trace& trace, std::ostream& out) {
  struct OpSummary {
    int count = 0;
    int64_t bytes = 0;
    std::vector<double> busbw, skew_ms;
    std::map<int, int> last;
  };
  std::map<std::string, OpSummary> ops;
  for (const auto& c : profiling::collective_metrics(trace)) {
    if (c.ranks < 2) continue;
    OpSummary& s = ops[c.op];
    ++s.count;
    s.bytes += c.size_bytes;
    if (c.busbw_gbps > 0) s.busbw.push_back(c.busbw_gbps);
    s.skew_ms.push_back(ms(c.skew_ns));
    ++s.last[c.last_rank];
  }
  out << "\ncollectives (matched across ranks):\n"
         "op                      count  MB total  median busbw  median skew ms  "
         "last to arrive (rank: times)\n";
  for (const auto& [op, s] : ops) {
    out << op << std::string(24 - std::min<size_t>(23, op.size()), ' ') << s.count << "  "
        << fixed(s.bytes / 1e6, 2) << "  " << profiling::format_gbps(analysis::median(s.busbw))
        << "  " << fixed(analysis::median(s.skew_ms), 3) << "  ";
    for (const auto& [rank, times] : s.last) out << rank << ":" << times << " ";
    out << "\n";
  }
}

}  // namespace

int report_command(const std::vector<std::string>& paths, const ReportOptions& options,
                   std::ostream& out, std::ostream& err) {
  profiling::Trace trace;
  std::string path;
  for (const auto& p : paths) path += (path.empty() ? "" : ", ") + p;
  try {
    trace = analysis::open_trace_paths(paths);
  } catch (const profiling::TraceFormatError& e) {
    err << "error: " << e.what() << "\n";
    return 2;
  }
  // The Kineto export (`run --trace DIR/`) holds the measured times, so the table that must agree
  // with Holistic Trace Analysis reads those, whatever lens the rest of the report uses.
  const std::vector<profiling::WindowMetrics> as_exported = profiling::window_metrics(trace);
  nlohmann::json lens_json;
  if (!apply_report_lens(options, &trace, &lens_json, out, err)) return 2;
  if (options.json) {
    print_figures_json(trace, path, lens_json, as_exported, out);
    return 0;
  }
  print_trace_header(trace, path, out);
  print_step_medians(trace, out);
  print_hta_windows(as_exported, out);
  print_pipeline_bubble(trace, out);
  print_collectives(trace, out);
  return 0;
}

}  // namespace shardscope::cli
