#include "app/cli/bench_command.h"

#include "app/analysis/comparison_table.h"
#include "app/analysis/device_time_lens.h"
#include "app/analysis/trace_projection.h"
#include "app/cli/run_outputs.h"
#include "app/cli/run_summary_text.h"

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/launch/stop_request.h"
#include "engine/state/atomic_file.h"
#include "engine/state/weights.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "engine/train/strategy_registry.h"
#include "profiling/io/trace_io.h"
#include "profiling/metrics/trace_metrics.h"
#include "profiling/projection/hardware_profile.h"
#include "strategies/layout/layout_fit.h"
#include "strategies/layout/parallel_layout.h"
#include "strategies/pipeline/pipeline_schedule.h"

namespace shardscope::cli {

nlohmann::json bench_defaults(bool quick) {
  // A comparison: world 4 on `small`, or a few steps of `tiny` with --quick.
  return {{"world", 4}, {"preset", quick ? "tiny" : "small"}, {"steps", quick ? 3 : 6}};
}

namespace {

// The run's row, from its trace. The run compared itself with the one reference all runs share
// (run_training's TrainedReference), and its trace keeps that as a run's does: the deviation,
// the reference's losses and each rank's weights against it, for a viewer's Weight-sync tab and
// loss chart.
analysis::ComparisonRow measure(const std::string& strategy, RunSummary& s,
                                const analysis::Lens& lens) {
  analysis::ComparisonRow row = analysis::comparison_row(s.trace);
  if (s.ok && !lens.measured) {
    // The times as N devices would take them; everything else is the run's own.
    const analysis::LensedTrace lensed = analysis::apply_lens(s.trace, lens);
    if (lensed.device_time) {
      analysis::time_row(lensed.trace, row);
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

void report_config_error(const ConfigError& e, std::ostream& err) {
  err << "error: " << RunFlags::describe_key(e.field()) << ": "
      << std::string(e.what()).substr(e.field().size() + 2) << "\n";
}

// The configuration every run starts from: the bench's defaults, then the config file and the
// flags. Throws ConfigError, as do strategies and schedules that do not exist.
Config base_config(const RunFlags& flags, const BenchOptions& options) {
  nlohmann::json overrides = bench_defaults(options.quick);
  overrides.merge_patch(flags.config_overrides(options.config_file));
  Config base = config_from_json(overrides);
  base.reference = false;  // one reference for all, below
  for (const auto& name : options.strategies) {
    if (StrategyRegistry::instance().find(name) == nullptr) {
      throw ConfigError("strategies", "unknown strategy '" + name + "'");
    }
  }
  for (const auto& name : options.schedules) {
    if (name == "all") continue;
    if (const std::string problem = pipeline::kind_problem(name); !problem.empty())
      throw ConfigError("schedules", problem);
  }
  return base;
}

// The first strategy that runs, as it runs (in the layout it needs); none: the first error.
// The options may suit only some strategies (those others are skipped later), but a
// configuration no listed strategy can run is bad input.
std::optional<Config> first_that_runs(const Config& base,
                                      const std::vector<std::string>& strategies,
                                      std::optional<ConfigError>* first_error) {
  std::optional<Config> first;
  for (const auto& name : strategies) {
    Config candidate = base;
    candidate.strategy = name;
    try {
      finalize(candidate);
      if (!first) first = candidate;
    } catch (const ConfigError& e) {
      if (auto fitted = fit_layout_to_model(candidate, nullptr)) {
        if (!first) first = *fitted;  // it runs in the layout its model allows
      } else if (!*first_error) {
        *first_error = e;
      }
    }
  }
  return first;
}

// What every run of a bench shares, once the options are checked.
struct BenchPlan {
  Config base;
  std::vector<BenchEntry> entries;
  analysis::Lens lens;
  std::vector<OutputClaim> claims;  // each entry's trace under --out, held until written
};

// Where an entry's trace goes under --out.
std::string entry_trace_path(const std::string& out_dir, const BenchEntry& entry) {
  std::string name = entry.label();
  std::replace(name.begin(), name.end(), ' ', '_');
  std::replace(name.begin(), name.end(), '+', '_');
  return out_dir + "/" + name + ".sst";
}

// The runs to make; none when the options are bad input (said on `err`).
std::optional<BenchPlan> plan_bench(const RunFlags& flags, const BenchOptions& options,
                                    std::ostream& err) {
  BenchPlan plan;
  Config& base = plan.base;
  try {
    base = base_config(flags, options);
  } catch (const ConfigError& e) {
    report_config_error(e, err);
    return std::nullopt;
  }
  std::vector<std::string> strategies = options.strategies;
  if (strategies.empty()) {
    for (const auto& name : StrategyRegistry::instance().names()) {
      if (strategy_traits(name).family != StrategyFamily::kReference) strategies.push_back(name);
    }
  }
  // The environment is checked and the reference trained for the first strategy that runs; the
  // others start from the options given.
  std::optional<ConfigError> first_error;
  std::optional<Config> first = first_that_runs(base, strategies, &first_error);
  if (!first) {
    report_config_error(*first_error, err);
    return std::nullopt;
  }
  try {
    check_environment(*first);
  } catch (const ConfigError& e) {
    report_config_error(e, err);
    return std::nullopt;
  }
  const StrategyOptions given = base.strategy_options;
  base = *first;
  base.strategy_options = given;
  std::vector<std::string> schedules = options.schedules;
  if (std::find(schedules.begin(), schedules.end(), "all") != schedules.end())
    schedules = pipeline::schedule_kinds();
  plan.entries = bench_entries(strategies, schedules, base);
  if (!options.out_dir.empty()) {
    // Checked before any strategy trains: a folder that cannot hold the traces is bad input.
    std::error_code ec;
    std::filesystem::create_directories(options.out_dir, ec);
    std::string why;
    if (ec) {
      why = "cannot create the folder " + options.out_dir + ": " + ec.message();
    } else if (!std::filesystem::is_directory(options.out_dir, ec)) {
      why = options.out_dir + " is not a folder";
    } else if (access(options.out_dir.c_str(), W_OK) != 0) {
      why = "cannot write in " + options.out_dir + ": " + std::strerror(errno);
    }
    if (!why.empty()) {
      err << "error: --out: " << why << "\n";
      return std::nullopt;
    }
    // Each trace it will write, checked as a run's outputs are (never a folder, a FIFO or a
    // symlink of that name, never two runs of bench at once), before any strategy trains.
    std::vector<OutputFile> traces;
    for (const BenchEntry& entry : plan.entries)
      traces.push_back({"--out", entry_trace_path(options.out_dir, entry), false, false});
    try {
      plan.claims = check_outputs(traces, {});
    } catch (const ConfigError& e) {
      err << "error: " << e.what() << "\n";
      return std::nullopt;
    }
  }
  plan.lens.measured = options.measured;
  plan.lens.hardware = options.hardware;
  if (!plan.lens.measured) {
    // Read before any training: a profile missing or broken (the binary moved away from its
    // assets) once aborted bench after every strategy had trained. Without --hardware, the
    // default of the runs' device is the one read.
    const bool given = !plan.lens.hardware.empty();
    const std::string name =
        given ? plan.lens.hardware : analysis::default_lens_hardware(base.device);
    try {
      profiling::load_hardware_profile(name);
    } catch (const std::exception& e) {
      err << "error: --hardware: " << e.what()
          << (given ? "" : " (the default for device time; give --hardware or --measured)") << "\n";
      return std::nullopt;
    }
  }
  return plan;
}

// The row of an entry whose configuration does not run here at all: skipped, with the reason.
analysis::ComparisonRow skipped_row(const BenchEntry& entry, const Config& config,
                                    const ConfigError& e) {
  analysis::ComparisonRow row;
  row.strategy = entry.strategy;
  row.skipped = true;
  row.failure = e.what();
  row.world = config.world;
  row.mode = config.mode;
  row.device = config.device;
  row.backend = config.backend;
  row.attributes = analysis::run_attributes(run_description(config));
  return row;
}

// Trains `config` as the k-th of n entries, its progress on `err`; a run that throws is a
// failed run, not the bench's end.
RunSummary run_entry(const Config& config, const BenchEntry& entry, size_t k, size_t n,
                     bool live_progress, const TrainedReference& reference, std::ostream& err) {
  RunCallbacks progress;
  if (live_progress) {
    progress.on_step = [&](const StepRecord& r) {
      err << "\r[" << k + 1 << "/" << n << "] " << entry.label() << ": step " << r.step + 1 << "/"
          << config.steps << "      " << std::flush;
    };
  }
  RunSummary s;
  try {
    s = run_training(config, progress, &reference);
  } catch (const std::exception& e) {
    s.config = config;
    s.ok = false;
    s.failure = e.what();
  }
  err << (live_progress ? "\r[" : "[") << k + 1 << "/" << n << "] " << entry.label()
      << (s.ok ? ": done" : ": FAILED") << (live_progress ? "              \n" : "\n");
  return s;
}

// Writes an entry's trace; a write that fails (a full disk) is said on `err` and counted, and
// the bench goes on.
bool write_entry_trace(const std::string& out_dir, const BenchEntry& entry,
                       const profiling::Trace& trace, std::ostream& err) {
  const std::string path = entry_trace_path(out_dir, entry);
  try {
    write_file_atomically(path, profiling::serialise_trace(trace, path));
    return true;
  } catch (const std::exception& e) {
    err << "error: cannot write --out " << path << ": " << e.what() << "\n";
    return false;
  }
}

struct BenchResults {
  std::vector<analysis::ComparisonRow> rows;
  std::vector<std::string> layout_notes;  // the strategies that ran in a layout of their own
  int failed = 0;
  int stopped_by_signal = 0;  // the signal that stopped the bench before its last strategy
};

BenchResults run_entries(const BenchPlan& plan, const TrainedReference& reference,
                         const BenchOptions& options, std::ostream& err) {
  BenchResults results;
  const std::vector<BenchEntry>& entries = plan.entries;
  for (size_t k = 0; k < entries.size(); ++k) {
    const BenchEntry& entry = entries[k];
    Config config = plan.base;
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
        results.layout_notes.push_back(entry.label() + " runs as " + layout +
                                       ": its default layout does not fit the model (" + why + ")");
      } else {
        results.rows.push_back(skipped_row(entry, config, e));
        continue;
      }
    }
    RunSummary s =
        run_entry(config, entry, k, entries.size(), options.live_progress, reference, err);
    if (s.stopped_by_signal != 0) {
      // Ctrl-C or SIGTERM: this strategy stopped at a step boundary, and the bench stops with
      // it; the rows so far are shown, the stopped one not (it trained part of its steps).
      results.stopped_by_signal = s.stopped_by_signal;
      err << "bench stopped by " << signal_name(s.stopped_by_signal) << " during " << entry.label()
          << " (" << k + 1 << " of " << entries.size() << ")\n";
      break;
    }
    if (!s.ok) ++results.failed;
    results.rows.push_back(measure(entry.strategy, s, plan.lens));
    // The layout the row ran as: bench's own where it had to choose one, else the recorded one.
    if (!layout.empty()) results.rows.back().layout = layout;
    if (!options.out_dir.empty() && !write_entry_trace(options.out_dir, entry, s.trace, err))
      ++results.failed;
  }
  return results;
}

// The table, with what it was measured on before it and the skipped and failed rows after.
void print_results(const BenchResults& results, const Config& base, const BenchOptions& options,
                   std::ostream& out, std::ostream& err) {
  const std::vector<analysis::ComparisonRow>& rows = results.rows;
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
  analysis::print_comparison(rows, options.format, out);
  for (const auto& note : results.layout_notes) notes << note << "\n";
  for (const auto& r : rows) {
    // Which row: with --schedules a strategy has several, told apart by their schedule.
    std::string name = r.strategy;
    if (!options.schedules.empty()) {
      const std::string schedule = analysis::attribute_value(r.attributes, "schedule");
      if (!schedule.empty()) name += " " + schedule;
    }
    if (r.skipped) notes << "skipped " << name << ": " << r.failure << "\n";
    if (!r.ok && !r.skipped) notes << "FAILED " << name << ": " << r.failure << "\n";
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
  const std::optional<BenchPlan> plan = plan_bench(flags, options, err);
  if (!plan) return 2;

  install_stop_signal_handlers(/*escalate=*/true);
  err << "training the single-device reference...\n";
  RunSummary reference = run_training(reference_config(plan->base));
  if (reference.stopped_by_signal != 0) {
    err << "bench stopped by " << signal_name(reference.stopped_by_signal)
        << " while training the reference: nothing to compare\n";
    return 128 + reference.stopped_by_signal;
  }
  if (!reference.ok) {
    err << "error: the reference run failed: " << reference.failure << "\n";
    return 1;
  }

  TrainedReference trained{reference.weights, {}};
  for (const auto& step : reference.steps) trained.losses.push_back(step.loss);
  const BenchResults results = run_entries(*plan, trained, options, err);
  print_results(results, plan->base, options, out, err);
  if (results.stopped_by_signal != 0) return 128 + results.stopped_by_signal;
  return results.failed > 0 ? 1 : 0;
}

}  // namespace shardscope::cli
