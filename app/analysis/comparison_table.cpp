#include "app/analysis/comparison_table.h"
#include "app/analysis/median.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "app/analysis/text_table.h"
#include "engine/state/recorded_config.h"
#include "engine/train/strategy_registry.h"
#include "profiling/metrics/trace_metrics.h"
#include "strategies/layout/parallel_layout.h"

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

// Per rank per step, the bytes its collectives put on the wire (busbw's count); the median over
// the steps after the first of the busiest rank.
int64_t wire_bytes_per_step(const profiling::Trace& trace) {
  int64_t busiest = 0;
  for (const auto& rank : trace.ranks) {
    std::map<int, double> by_step;
    for (const auto& e : rank.events) {
      if (e.category != profiling::Category::kCollective || e.step < 0) continue;
      const std::string& op = trace.str(e.name);
      if (op == "recv" || op == "barrier") continue;  // a transfer counts once, at its sender
      const int n = std::max<int>(2, e.group_size);
      const double whole = op.rfind("all_gather", 0) == 0 ? double(e.bytes) * n : e.bytes;
      by_step[e.step] += whole * profiling::busbw_factor(op, n);
    }
    if (by_step.size() > 1) by_step.erase(by_step.begin());
    std::vector<double> steps;
    for (const auto& [step, bytes] : by_step) steps.push_back(bytes);
    busiest = std::max(busiest, static_cast<int64_t>(median(steps)));
  }
  return busiest;
}

// How a model-parallel run is laid out ("dp2 x pp2"), from its recorded configuration.
std::string recorded_layout(const profiling::RunRecord& run) {
  if (strategy_traits(run.strategy).family != StrategyFamily::kModelParallel) return "";
  try {
    const std::optional<Config> config = recorded_config(run);
    return config ? layout_of(*config).describe() : "";
  } catch (const std::exception&) {
    return "";  // a configuration this build cannot lay out: the row keeps its bare name
  }
}

std::string step_cell(const ComparisonRow& r) {
  std::string cell = fixed(r.step_s * 1e3, 2);
  if (r.step_max_s > r.step_min_s)
    cell += " (" + fixed(r.step_min_s * 1e3, 2) + "-" + fixed(r.step_max_s * 1e3, 2) + ")";
  return cell;
}

// Against the fastest row: a difference within the two rows' spread over steps cannot be told
// from the recording's noise, and says so ("within spread"), not that the rows are the same.
std::string vs_fastest(const ComparisonRow& r, const std::vector<ComparisonRow>& rows) {
  const ComparisonRow* fastest = nullptr;
  for (const auto& other : rows) {
    if (other.ok && other.step_s > 0 && (fastest == nullptr || other.step_s < fastest->step_s))
      fastest = &other;
  }
  if (fastest == nullptr || r.step_s <= 0) return "";
  if (fastest == &r) return "fastest";
  if (r.step_min_s <= fastest->step_max_s) return "within spread";
  return "+" + fixed(100.0 * (r.step_s / fastest->step_s - 1), 0) + " %";
}

}  // namespace

void time_row(const profiling::Trace& timed, ComparisonRow& row) {
  // The recording's own step-to-step variation, as a fraction of its median: device time gives
  // each piece of work its median, which leaves its steps alike, so this is the run's noise.
  const double measured = row.step_s, low = row.step_min_s, high = row.step_max_s;
  std::map<int, double> slowest;
  std::map<int, std::vector<double>> overlap_by_rank;
  std::vector<double> overlap, exposed;
  const auto metrics = profiling::step_metrics(timed);
  int first = INT32_MAX;
  for (const auto& m : metrics) first = std::min(first, m.step);
  for (const auto& m : metrics) {
    slowest[m.step] = std::max(slowest[m.step], m.span_ns * 1e-9);
    if (m.step == first && metrics.size() > timed.ranks.size()) continue;
    overlap.push_back(m.overlap_fraction());
    overlap_by_rank[m.rank].push_back(m.overlap_fraction());
    exposed.push_back(m.exposed_comm_ns * 1e-6);
  }
  if (slowest.size() > 1) slowest.erase(slowest.begin());
  std::vector<double> steps;
  for (const auto& [step, s] : slowest) steps.push_back(s);
  if (!steps.empty()) {
    row.step_s = median(steps);
    row.step_min_s = *std::min_element(steps.begin(), steps.end());
    row.step_max_s = *std::max_element(steps.begin(), steps.end());
    if (measured > 0 && high > low) {
      row.step_min_s = std::min(row.step_min_s, row.step_s * low / measured);
      row.step_max_s = std::max(row.step_max_s, row.step_s * high / measured);
    }
  }
  row.overlap = median(overlap);
  row.exposed_ms = median(exposed);
  row.overlap_worst = overlap_by_rank.empty() ? 0.0 : 1.0;
  for (const auto& [rank, values] : overlap_by_rank)
    row.overlap_worst = std::min(row.overlap_worst, median(values));
}

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
  row.layout = recorded_layout(run);
  row.wire_bytes_per_step = wire_bytes_per_step(trace);
  // Overlap and exposed communication from the trace; step times as the run measured them.
  time_row(trace, row);
  std::vector<double> times;
  for (size_t i = steps.size() > 1 ? 1 : 0; i < steps.size(); ++i)
    times.push_back(steps[i].step_time_s);
  if (!times.empty()) {
    row.step_s = median(times);
    row.step_min_s = *std::min_element(times.begin(), times.end());
    row.step_max_s = *std::max_element(times.begin(), times.end());
  }
  return row;
}

std::vector<std::string> comparison_headers(const std::vector<std::string>& shown) {
  std::vector<std::string> headers{"strategy", "world"};
  for (const auto& name : shown) headers.push_back(attribute_header(name));
  for (const char* h : {"mode", "device/backend", "peak MB/rank", "spread MB", "vs torch_ddp",
                        "weights", "final loss", "step ms", "vs fastest", "wire MB/rank/step",
                        "overlap worst rank / median", "exposed ms"}) {
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
  for (std::string cell :
       {fixed(r.peak_max / 1e6, 1), fixed((r.peak_max - r.peak_min) / 1e6, 1), change,
        weight_status(r), fixed(r.final_loss, 4), step_cell(r), vs_fastest(r, rows),
        fixed(r.wire_bytes_per_step / 1e6, 2),
        fixed(100 * r.overlap_worst, 0) + " % / " + fixed(100 * r.overlap, 0) + " %",
        fixed(r.exposed_ms, 2)}) {
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
           {"step_s_min", r.step_min_s},
           {"step_s_max", r.step_max_s},
           {"vs_fastest", vs_fastest(r, rows)},
           {"bytes_per_step", r.bytes_per_step},
           {"wire_bytes_per_rank_step", r.wire_bytes_per_step},
           {"overlap", r.overlap},
           {"overlap_worst_rank", r.overlap_worst},
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
