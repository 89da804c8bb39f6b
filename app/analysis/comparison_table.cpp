#include "app/analysis/comparison_table.h"
#include "app/analysis/median.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "app/analysis/text_table.h"
#include "engine/train/strategy_registry.h"
#include "profiling/metrics/trace_metrics.h"

namespace shardscope::analysis {
namespace {

std::string fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

std::string sci(double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2g", value);
  return buf;
}

std::string weight_status(const ComparisonRow& r) {
  std::string status = r.replicated ? std::string(r.ranks_agree ? "ranks agree" : "RANKS DISAGREE")
                                    : std::string("gathered");
  if (r.has_reference) status += ", dev " + sci(r.deviation);
  return status;
}

// PyTorch's own DDP (the strategy whose traits say baseline): the other strategies' memory is
// read against it.
bool is_torch_ddp(const ComparisonRow& r) {
  return strategy_traits(r.strategy).baseline;
}

}  // namespace

ComparisonRow comparison_row(const profiling::Trace& trace, const std::string& lens) {
  ComparisonRow row;
  row.attributes = run_attributes(trace.run, lens);
  const profiling::RunRecord& run = trace.run;
  row.strategy = run.strategy.empty() ? "?" : run.strategy;
  row.world = run.world;
  row.mode = run.mode;
  row.device = run.device;
  row.backend = run.backend;
  if (!run.result) {
    // Not our run, or one still going: a trace to look at, with no result to judge.
    row.no_result = true;
    row.failure = "no result recorded";
    return row;
  }
  const profiling::RunResult& result = *run.result;
  row.ok = result.ok;
  row.failure = result.failure;
  if (!row.ok) return row;
  row.peak_min = INT64_MAX;
  for (const auto& r : result.ranks) {
    row.peak_max = std::max(row.peak_max, r.peak_allocated_bytes);
    row.peak_min = std::min(row.peak_min, r.peak_allocated_bytes);
    row.bytes_per_step = std::max(row.bytes_per_step, r.comm_bytes_per_step);
  }
  if (row.peak_min == INT64_MAX) row.peak_min = 0;
  row.replicated = result.replicated;
  row.ranks_agree = result.ranks_agree;
  if (result.reference) {
    row.has_reference = true;
    row.deviation = result.reference->rel_deviation;
    row.max_abs = result.reference->max_abs_deviation;
  }
  const auto& steps = result.steps;
  if (!steps.empty()) row.final_loss = steps.back().loss;
  std::vector<double> times;
  for (size_t i = steps.size() > 1 ? 1 : 0; i < steps.size(); ++i)
    times.push_back(steps[i].step_time_s);
  row.step_s = median(times);
  // Overlap and exposed communication: medians over steps after the first, over all ranks.
  std::vector<double> overlap, exposed;
  for (const auto& m : profiling::step_metrics(trace)) {
    if (m.step == 0 && steps.size() > 1) continue;
    overlap.push_back(m.overlap_fraction());
    exposed.push_back(m.exposed_comm_ns * 1e-6);
  }
  row.overlap = median(overlap);
  row.exposed_ms = median(exposed);
  return row;
}

std::vector<std::string> comparison_headers(const std::vector<std::string>& shown) {
  std::vector<std::string> headers{"strategy", "world"};
  for (const auto& name : shown) headers.push_back(attribute_header(name));
  for (const char* h : {"mode", "device/backend", "peak MB/rank", "spread MB", "vs torch_ddp",
                        "weights", "final loss", "step ms", "MB/step", "overlap", "exposed ms"}) {
    headers.push_back(h);
  }
  return headers;
}

const ComparisonRow* torch_ddp_baseline(const ComparisonRow& row,
                                        const std::vector<ComparisonRow>& rows) {
  for (const auto& r : rows) {
    if (is_torch_ddp(r) && r.ok && why_not_comparable(row.attributes, r.attributes).empty())
      return &r;
  }
  return nullptr;
}

std::vector<std::string> distinguishing_columns(const std::vector<ComparisonRow>& rows) {
  std::vector<RunAttributes> runs;
  for (const auto& r : rows) {
    runs.push_back(r.attributes);
    // A row with no figures was timed by no lens: it does not make the lens a column.
    if (!r.ok) runs.back().lens.clear();
  }
  return runs.empty() ? std::vector<std::string>{} : distinguishing_attributes(runs);
}

std::vector<std::string> comparison_cells(const ComparisonRow& r,
                                          const std::vector<ComparisonRow>& rows,
                                          const std::vector<std::string>& shown) {
  // A row that needed its own layout says which: "pp (dp2 x pp2)".
  std::vector<std::string> cells{r.layout.empty() ? r.strategy : r.strategy + " (" + r.layout + ")",
                                 std::to_string(r.world)};
  for (const auto& name : shown) cells.push_back(attribute_value(r.attributes, name));
  cells.push_back(r.mode);
  cells.push_back(r.device.empty() && r.backend.empty() ? "" : r.device + "/" + r.backend);
  if (!r.ok) {
    cells.push_back(r.skipped ? "skipped" : r.no_result ? "no result recorded" : "FAILED");
    cells.resize(comparison_headers(shown).size());
    return cells;
  }
  std::string change;
  if (const ComparisonRow* baseline = torch_ddp_baseline(r, rows);
      baseline != nullptr && baseline->peak_max > 0) {
    const double pct = 100.0 * (double(r.peak_max) - baseline->peak_max) / baseline->peak_max;
    change = (pct >= 0 ? "+" : "") + fixed(pct, 1) + " %";
  } else {
    // A torch_ddp run is loaded but of another model or batch: say so rather than leave a
    // blank that reads like "no difference".
    for (const auto& other : rows) {
      if (!is_torch_ddp(other) || !other.ok) continue;
      change = why_not_comparable(r.attributes, other.attributes);
      if (!change.empty()) change = "n/a: " + change;
      break;
    }
  }
  for (std::string cell : {fixed(r.peak_max / 1e6, 1), fixed((r.peak_max - r.peak_min) / 1e6, 1),
                           change, weight_status(r), fixed(r.final_loss, 4),
                           fixed(r.step_s * 1e3, 2), fixed(r.bytes_per_step / 1e6, 1),
                           fixed(100 * r.overlap, 0) + " %", fixed(r.exposed_ms, 2)}) {
    cells.push_back(std::move(cell));
  }
  return cells;
}

void print_comparison(const std::vector<ComparisonRow>& rows, const std::string& format,
                      std::ostream& out) {
  if (format == "json") {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json attributes = nlohmann::json::object();
      for (const auto& name : attribute_names())
        attributes[name] = attribute_value(r.attributes, name);
      const ComparisonRow* baseline = torch_ddp_baseline(r, rows);
      all.push_back(
          {{"strategy", r.strategy},
           {"label", run_label(r.attributes, distinguishing_columns(rows))},
           {"attributes", attributes},
           {"layout", r.layout},
           {"vs_torch_ddp_peak", baseline != nullptr && r.ok && baseline->peak_max > 0
                                     ? nlohmann::json(double(r.peak_max) / baseline->peak_max - 1)
                                     : nlohmann::json()},
           {"ok", r.ok},
           {"skipped", r.skipped},
           {"failure", r.failure},
           {"world", r.world},
           {"mode", r.mode},
           {"device", r.device},
           {"backend", r.backend},
           {"peak_allocated_bytes_max", r.peak_max},
           {"peak_allocated_bytes_min", r.peak_min},
           {"replicated", r.replicated},
           {"ranks_agree", r.ranks_agree},
           {"rel_deviation", r.deviation},
           {"max_abs_deviation", r.max_abs},
           {"final_loss", r.final_loss},
           {"median_step_s", r.step_s},
           {"bytes_per_step", r.bytes_per_step},
           {"overlap", r.overlap},
           {"exposed_comm_ms", r.exposed_ms}});
    }
    out << all.dump(2) << "\n";
    return;
  }
  const auto shown = distinguishing_columns(rows);
  std::vector<std::vector<std::string>> table{comparison_headers(shown)};
  for (const auto& r : rows) table.push_back(comparison_cells(r, rows, shown));
  if (format == "csv") {
    for (const auto& line : table) {
      for (size_t i = 0; i < line.size(); ++i) {
        std::string cell = line[i];
        if (cell.find(',') != std::string::npos) cell = "\"" + cell + "\"";
        out << (i ? "," : "") << cell;
      }
      out << "\n";
    }
    return;
  }
  print_text_table(table, format == "markdown", out);
}

}  // namespace shardscope::analysis
