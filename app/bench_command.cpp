#include "app/bench_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/atomic_file.h"
#include "engine/config.h"
#include "engine/run.h"
#include "engine/strategy_registry.h"
#include "engine/weights.h"
#include "profiling/trace_io.h"
#include "profiling/trace_metrics.h"

namespace shardscope::cli {
namespace {

struct Row {
  std::string strategy;
  bool ok = false;
  std::string failure;  // or why it was skipped
  bool skipped = false;
  int world = 0;
  std::string mode, device, backend;
  int64_t peak_max = 0, peak_min = 0;  // allocated bytes per rank
  bool replicated = true, ranks_agree = false;
  double deviation = 0, max_abs = 0;  // from the single-device reference
  double final_loss = 0, step_s = 0;
  int64_t bytes_per_step = 0;
  double overlap = 0, exposed_ms = 0;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

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

Row measure(const std::string& strategy, const RunSummary& s, const NamedTensors& reference) {
  Row row;
  row.strategy = strategy;
  row.world = s.config.world;
  row.mode = s.config.mode;
  row.device = s.config.device;
  row.backend = s.config.backend;
  row.ok = s.ok;
  row.failure = s.failure;
  if (!s.ok) return row;
  row.peak_min = INT64_MAX;
  for (const auto& r : s.ranks) {
    row.peak_max = std::max(row.peak_max, r.peak_allocated_bytes);
    row.peak_min = std::min(row.peak_min, r.peak_allocated_bytes);
    row.bytes_per_step = std::max(row.bytes_per_step, r.comm_bytes_per_step);
  }
  row.replicated = s.replicated;
  row.ranks_agree = s.ranks_agree;
  const WeightDeviation d = compare_weights(s.weights, reference);
  row.deviation = d.rel;
  row.max_abs = d.max_abs;
  row.final_loss = s.steps.back().loss;
  std::vector<double> times;
  for (size_t i = s.steps.size() > 1 ? 1 : 0; i < s.steps.size(); ++i)
    times.push_back(s.steps[i].step_time_s);
  row.step_s = median(times);
  // Overlap and exposed communication: medians over steps after the first, averaged over ranks.
  std::vector<double> overlap, exposed;
  for (const auto& m : profiling::step_metrics(s.trace)) {
    if (m.step == 0 && s.steps.size() > 1) continue;
    overlap.push_back(m.overlap_fraction());
    exposed.push_back(m.exposed_comm_ns * 1e-6);
  }
  row.overlap = median(overlap);
  row.exposed_ms = median(exposed);
  return row;
}

std::string weight_status(const Row& r) {
  return (r.replicated ? std::string(r.ranks_agree ? "ranks agree" : "RANKS DISAGREE")
                       : std::string("gathered")) +
         ", dev " + sci(r.deviation);
}

std::vector<std::string> headers() {
  return {"strategy",  "world",        "mode",      "device/backend", "peak MB/rank",
          "spread MB", "vs torch_ddp", "weights",   "final loss",     "step s",
          "MB/step",   "overlap",      "exposed ms"};
}

std::vector<std::string> cells(const Row& r, const Row* baseline) {
  if (!r.ok) {
    return {r.strategy,
            std::to_string(r.world),
            r.mode,
            r.device + "/" + r.backend,
            r.skipped ? "skipped" : "FAILED",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            ""};
  }
  std::string change = "";
  if (baseline != nullptr && baseline->ok && baseline->peak_max > 0) {
    const double pct = 100.0 * (double(r.peak_max) - baseline->peak_max) / baseline->peak_max;
    change = (pct >= 0 ? "+" : "") + fixed(pct, 1) + " %";
  }
  return {r.strategy,
          std::to_string(r.world),
          r.mode,
          r.device + "/" + r.backend,
          fixed(r.peak_max / 1e6, 1),
          fixed((r.peak_max - r.peak_min) / 1e6, 1),
          change,
          weight_status(r),
          fixed(r.final_loss, 4),
          fixed(r.step_s, 3),
          fixed(r.bytes_per_step / 1e6, 1),
          fixed(100 * r.overlap, 0) + " %",
          fixed(r.exposed_ms, 1)};
}

void print(const std::vector<Row>& rows, const std::string& format, std::ostream& out) {
  const Row* baseline = nullptr;
  for (const auto& r : rows) {
    if (r.strategy == "torch_ddp") baseline = &r;
  }
  if (format == "json") {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& r : rows) {
      all.push_back({{"strategy", r.strategy},
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
  std::vector<std::vector<std::string>> table{headers()};
  for (const auto& r : rows) table.push_back(cells(r, baseline));
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
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& line : table)
    for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  for (size_t k = 0; k < table.size(); ++k) {
    const auto& line = table[k];
    if (format == "markdown") out << "| ";
    for (size_t i = 0; i < line.size(); ++i) {
      out << line[i] << std::string(width[i] - line[i].size(), ' ')
          << (format == "markdown" ? " | " : "  ");
    }
    out << "\n";
    if (k == 0 && format == "markdown") {
      out << "|";
      for (size_t w : width) out << std::string(w + 2, '-') << "|";
      out << "\n";
    }
  }
}

}  // namespace

int bench_command(const RunFlags& flags, const BenchOptions& options, std::ostream& out,
                  std::ostream& err) {
  if (options.format != "table" && options.format != "csv" && options.format != "json" &&
      options.format != "markdown") {
    err << "error: --format: unknown format '" << options.format
        << "' (table, csv, json, markdown)\n";
    return 2;
  }
  Config base;
  std::vector<std::string> strategies = options.strategies;
  auto bad_input = [&](const ConfigError& e) {
    err << "error: " << RunFlags::describe_key(e.field()) << ": "
        << std::string(e.what()).substr(e.field().size() + 2) << "\n";
    return 2;
  };
  try {
    nlohmann::json overrides = nlohmann::json::object();
    // Defaults of a comparison: world 4 on `small`, or a few steps of `tiny` with --quick.
    overrides["world"] = 4;
    overrides["preset"] = options.quick ? "tiny" : "small";
    overrides["steps"] = options.quick ? 3 : 6;
    overrides.merge_patch(flags.config_overrides(options.config_file));
    base = config_from_json(overrides);
    base.reference = false;  // one reference for all, below
    for (const auto& name : strategies) {
      if (StrategyRegistry::instance().find(name) == nullptr) {
        throw ConfigError("strategies", "unknown strategy '" + name + "'");
      }
    }
  } catch (const ConfigError& e) {
    return bad_input(e);
  }
  if (strategies.empty()) {
    for (const auto& name : StrategyRegistry::instance().names()) {
      if (name != "single") strategies.push_back(name);
    }
  }
  // The options may suit only some strategies (those others are skipped below), but a
  // configuration no listed strategy can run is bad input.
  std::optional<ConfigError> first_error;
  bool any_runs = false;
  for (const auto& name : strategies) {
    Config candidate = base;
    candidate.strategy = name;
    try {
      finalize(candidate);
      if (!any_runs) base = candidate;
      any_runs = true;
    } catch (const ConfigError& e) {
      if (!first_error) first_error = e;
    }
  }
  if (!any_runs) return bad_input(*first_error);
  try {
    check_environment(base);
  } catch (const ConfigError& e) {
    return bad_input(e);
  }
  if (!options.out_dir.empty()) std::filesystem::create_directories(options.out_dir);

  err << "training the single-device reference...\n";
  RunSummary reference = run_training(reference_config(base));
  if (!reference.ok) {
    err << "error: the reference run failed: " << reference.failure << "\n";
    return 1;
  }

  std::vector<Row> rows;
  int failed = 0;
  for (size_t k = 0; k < strategies.size(); ++k) {
    Config config = base;
    config.strategy = strategies[k];
    try {
      finalize(config);
    } catch (const ConfigError& e) {
      Row row;
      row.strategy = strategies[k];
      row.skipped = true;
      row.failure = e.what();
      row.world = config.world;
      row.mode = config.mode;
      row.device = config.device;
      row.backend = config.backend;
      rows.push_back(row);
      continue;
    }
    RunCallbacks progress;
    progress.on_step = [&](const StepRecord& r) {
      err << "\r[" << k + 1 << "/" << strategies.size() << "] " << strategies[k] << ": step "
          << r.step + 1 << "/" << config.steps << "      " << std::flush;
    };
    RunSummary s;
    try {
      s = run_training(config, progress);
    } catch (const std::exception& e) {
      s.config = config;
      s.ok = false;
      s.failure = e.what();
    }
    err << "\r[" << k + 1 << "/" << strategies.size() << "] " << strategies[k]
        << (s.ok ? ": done" : ": FAILED") << "              \n";
    if (!s.ok) ++failed;
    if (!options.out_dir.empty()) {
      std::string name = strategies[k];
      std::replace(name.begin(), name.end(), '+', '_');
      const std::string path = options.out_dir + "/" + name + ".sst";
      write_file_atomically(path, profiling::serialise_trace(s.trace, path));
    }
    rows.push_back(measure(strategies[k], s, reference.weights));
  }

  const bool text = options.format == "table" || options.format == "markdown";
  std::ostream& notes = text ? out : err;  // keep csv and json machine-readable
  notes << "bench: " << base.preset << " preset, world " << base.world << ", " << base.steps
        << " steps, micro-batch " << base.micro_batch << " x accumulation " << base.grad_accum
        << ", seed " << base.seed << "; peak = allocated bytes a rank held at once; deviation = "
        << "||w - ref|| / ||ref|| against one device on the same batches\n";
  print(rows, options.format, out);
  for (const auto& r : rows) {
    if (r.skipped) notes << "skipped " << r.strategy << ": " << r.failure << "\n";
    if (!r.ok && !r.skipped) notes << "FAILED " << r.strategy << ": " << r.failure << "\n";
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace shardscope::cli
