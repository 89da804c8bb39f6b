#include "app/bench_command.h"

#include "app/comparison_table.h"
#include "app/device_time_lens.h"
#include "app/trace_projection.h"

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
#include "profiling/hardware_profile.h"
#include "profiling/trace_io.h"
#include "profiling/trace_metrics.h"
#include "strategies/layout_fit.h"
#include "strategies/parallel_layout.h"
#include "strategies/pipeline_schedule.h"

namespace shardscope::cli {
namespace {

// The run's row, from its trace; the deviation is measured against the one reference all runs
// share, and kept in the trace too so that a viewer shows it.
ComparisonRow measure(const std::string& strategy, RunSummary& s, const NamedTensors& reference,
                      const Lens& lens) {
  if (s.ok) {
    const WeightDeviation d = compare_weights(s.weights, reference);
    if (s.trace.run.result)
      s.trace.run.result->reference =
          profiling::RecordedReference{d.max_abs, d.rel, d.worst, d.worst_rel, {}};
  }
  ComparisonRow row = comparison_row(s.trace);
  if (s.ok && !lens.measured) {
    // The times as N devices would take them; everything else is the run's own.
    const LensedTrace lensed = apply_lens(s.trace, lens);
    if (lensed.device_time) {
      const ComparisonRow timed = comparison_row(lensed.trace);
      row.step_s = summarise(lensed.trace).step_s;
      row.overlap = timed.overlap;
      row.exposed_ms = timed.exposed_ms;
      row.lens = "device time on " + lensed.hardware;
      row.attributes.lens = row.lens;  // what names the row, beside the measured ones
    }
  }
  row.strategy = strategy;
  row.world = s.config.world;
  row.mode = s.config.mode;
  row.device = s.config.device;
  row.backend = s.config.backend;
  row.ok = s.ok;
  if (!s.ok) row.failure = s.failure;
  return row;
}

// What a bench runs: a strategy, and the pipeline schedule it runs under (empty: the
// configured one).
struct BenchEntry {
  std::string strategy, schedule;
  std::string label() const { return schedule.empty() ? strategy : strategy + " " + schedule; }
};

// Whether `config` runs a pipeline, as given or in the layout its model allows.
bool runs_a_pipeline(Config config) {
  std::optional<Config> runs;
  try {
    finalize(config);
    runs = config;
  } catch (const ConfigError&) {
    runs = fit_layout_to_model(config, nullptr);
  }
  return runs && layout_of(*runs).pipeline > 1;
}

// A row per schedule for each strategy that runs a pipeline under one of them, one row for the
// others. A schedule that a pipeline cannot run here keeps its row, skipped with the reason.
std::vector<BenchEntry> bench_entries(const std::vector<std::string>& strategies,
                                      const std::vector<std::string>& schedules,
                                      const Config& base) {
  std::vector<BenchEntry> entries;
  for (const auto& name : strategies) {
    bool takes_a_schedule = false;
    for (const auto& schedule : schedules) {
      Config c = base;
      c.strategy = name;
      c.strategy_options.schedule = schedule;
      takes_a_schedule = takes_a_schedule || runs_a_pipeline(c);
    }
    if (!takes_a_schedule) {
      entries.push_back({name, ""});
      continue;
    }
    for (const auto& schedule : schedules) entries.push_back({name, schedule});
  }
  return entries;
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
    for (const auto& name : options.schedules) {
      if (name == "all") continue;
      if (const std::string problem = pipeline::kind_problem(name); !problem.empty())
        throw ConfigError("schedules", problem);
    }
  } catch (const ConfigError& e) {
    return bad_input(e);
  }
  if (strategies.empty()) {
    for (const auto& name : StrategyRegistry::instance().names()) {
      if (strategy_traits(name).family != "reference") strategies.push_back(name);
    }
  }
  // The options may suit only some strategies (those others are skipped below), but a
  // configuration no listed strategy can run is bad input.
  std::optional<ConfigError> first_error;
  bool any_runs = false;
  // The first strategy that runs, as it runs (in the layout it needs): the environment is checked
  // and the reference trained for it; the others start from the options given.
  Config first;
  for (const auto& name : strategies) {
    Config candidate = base;
    candidate.strategy = name;
    try {
      finalize(candidate);
      if (!any_runs) first = candidate;
      any_runs = true;
    } catch (const ConfigError& e) {
      if (auto fitted = fit_layout_to_model(candidate, nullptr)) {
        if (!any_runs) first = *fitted;  // it runs in the layout its model allows (below)
        any_runs = true;
      } else if (!first_error) {
        first_error = e;
      }
    }
  }
  if (!any_runs) return bad_input(*first_error);
  try {
    check_environment(first);
  } catch (const ConfigError& e) {
    return bad_input(e);
  }
  const StrategyOptions given = base.strategy_options;
  base = first;
  base.strategy_options = given;
  std::vector<std::string> schedules = options.schedules;
  if (std::find(schedules.begin(), schedules.end(), "all") != schedules.end())
    schedules = pipeline::schedule_kinds();
  const std::vector<BenchEntry> entries = bench_entries(strategies, schedules, base);
  if (!options.out_dir.empty()) std::filesystem::create_directories(options.out_dir);
  Lens lens;
  lens.measured = options.measured;
  lens.hardware = options.hardware;
  if (!lens.measured && !lens.hardware.empty()) {
    try {
      profiling::load_hardware_profile(lens.hardware);
    } catch (const std::exception& e) {
      err << "error: --hardware: " << e.what() << "\n";
      return 2;
    }
  }

  err << "training the single-device reference...\n";
  RunSummary reference = run_training(reference_config(base));
  if (!reference.ok) {
    err << "error: the reference run failed: " << reference.failure << "\n";
    return 1;
  }

  std::vector<ComparisonRow> rows;
  std::vector<std::string> layout_notes;
  int failed = 0;
  for (size_t k = 0; k < entries.size(); ++k) {
    const BenchEntry& entry = entries[k];
    Config config = base;
    config.strategy = entry.strategy;
    if (!entry.schedule.empty()) config.strategy_options.schedule = entry.schedule;
    std::string layout;  // said in the table when the strategy needed its own layout
    try {
      finalize(config);
    } catch (const ConfigError& e) {
      // pp on `tiny` asks for a stage per rank, more than the model has blocks: it runs with
      // the pipeline the model allows and data parallelism for the rest, on the same model and
      // global batch, rather than losing its row.
      if (auto fitted = fit_layout_to_model(config, &layout)) {
        config = *fitted;
        const std::string why = std::string(e.what()).substr(e.field().size() + 2);
        layout_notes.push_back(entry.label() + " runs as " + layout +
                               ": its default layout does not fit the model (" + why + ")");
      } else {
        ComparisonRow row;
        row.strategy = entry.strategy;
        row.skipped = true;
        row.failure = e.what();
        row.world = config.world;
        row.mode = config.mode;
        row.device = config.device;
        row.backend = config.backend;
        row.attributes = run_attributes(run_description(config));
        rows.push_back(row);
        continue;
      }
    }
    RunCallbacks progress;
    if (options.live_progress) {
      progress.on_step = [&](const StepRecord& r) {
        err << "\r[" << k + 1 << "/" << entries.size() << "] " << entry.label() << ": step "
            << r.step + 1 << "/" << config.steps << "      " << std::flush;
      };
    }
    RunSummary s;
    try {
      s = run_training(config, progress);
    } catch (const std::exception& e) {
      s.config = config;
      s.ok = false;
      s.failure = e.what();
    }
    err << (options.live_progress ? "\r[" : "[") << k + 1 << "/" << entries.size() << "] "
        << entry.label() << (s.ok ? ": done" : ": FAILED")
        << (options.live_progress ? "              \n" : "\n");
    if (!s.ok) ++failed;
    rows.push_back(measure(entry.strategy, s, reference.weights, lens));
    rows.back().layout = layout;
    if (!options.out_dir.empty()) {
      std::string name = entry.label();
      std::replace(name.begin(), name.end(), ' ', '_');
      std::replace(name.begin(), name.end(), '+', '_');
      const std::string path = options.out_dir + "/" + name + ".sst";
      write_file_atomically(path, profiling::serialise_trace(s.trace, path));
    }
  }

  const bool text = options.format == "table" || options.format == "markdown";
  std::ostream& notes = text ? out : err;  // keep csv and json machine-readable
  notes << "bench: " << base.preset << " preset, world " << base.world << ", " << base.steps
        << " steps, micro-batch " << base.micro_batch << " x accumulation " << base.grad_accum
        << ", seed " << base.seed << "; peak = allocated bytes a rank held at once; deviation = "
        << "||w - ref|| / ||ref|| against one device on the same batches\n";
  std::string timed_by = "the measured wall clock";
  for (const auto& r : rows) {
    if (r.lens != "measured") timed_by = r.lens + ", each rank on a device of its own";
  }
  notes << "step time, overlap and exposed communication: " << timed_by
        << (options.measured ? "" : " (--measured for the wall clock)") << "\n";
  print_comparison(rows, options.format, out);
  for (const auto& note : layout_notes) notes << note << "\n";
  for (const auto& r : rows) {
    // Which row: with --schedules a strategy has several, told apart by their schedule.
    std::string name = r.strategy;
    if (!options.schedules.empty()) {
      const std::string schedule = attribute_value(r.attributes, "schedule");
      if (!schedule.empty()) name += " " + schedule;
    }
    if (r.skipped) notes << "skipped " << name << ": " << r.failure << "\n";
    if (!r.ok && !r.skipped) notes << "FAILED " << name << ": " << r.failure << "\n";
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace shardscope::cli
