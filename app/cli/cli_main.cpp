#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/analysis/trace_open.h"
#include "app/analysis/trace_output.h"
#include "app/cli/bench_command.h"
#include "app/cli/calibrate_command.h"
#include "app/cli/cli_flags.h"
#include "app/cli/cli_main.h"
#include "app/cli/collect_command.h"
#include "app/cli/project_args.h"
#include "app/cli/report_command.h"
#include "app/cli/run_command.h"
#include "app/cli/run_outputs.h"
#include "app/cli/worker_command.h"
#include "app/gui/gui_app.h"
#include "app/gui/gui_script.h"
#include "app/perf/busbw_ranks.h"
#include "app/perf/perf_suite.h"
#include "engine/state/weights.h"
#include "engine/state/weights_file.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "engine/train/strategy_registry.h"
#include "profiling/io/input_file.h"
#include "profiling/io/trace_io.h"

namespace shardscope::cli {

namespace {

// What each subcommand's flags are bound to: CLI11 writes into these while it parses, so they
// live in cli_main's frame until the command has run.
struct RunArgs {
  CLI::App* app = nullptr;
  RunFlags flags;
  RunOutputs outputs;
  bool no_reference = false;
  CLI::Option* tolerance = nullptr;
};

struct BenchArgs {
  CLI::App* app = nullptr;
  RunFlags flags;
  BenchOptions options;
  std::string strategies, schedules;  // comma-separated, split after parsing
};

struct ReportArgs {
  CLI::App* app = nullptr;
  std::vector<std::string> files;
  ReportOptions options;
};

struct CalibrateArgs {
  CLI::App* app = nullptr;
  CalibrateOptions options;
};

struct WorkerArgs {
  CLI::App* app = nullptr;
  std::string config, out;
};

struct CollectArgs {
  CLI::App* app = nullptr;
  CollectOptions options;
};

// `gui` and `view` both open the desktop app, into the same options.
struct GuiArgs {
  CLI::App* gui_app = nullptr;
  CLI::App* view_app = nullptr;
  gui::GuiOptions options;
  std::string size;  // WIDTHxHEIGHT, parsed after CLI11
  std::vector<std::string> view_files;
};

struct PerfArgs {
  CLI::App* app = nullptr;
  perf::PerfOptions options;
  std::string only, format = "table";
};

// `perf-busbw-rank`: one rank process of the backends section's timings (hidden).
struct BusbwRankCommand {
  CLI::App* app = nullptr;
  perf::BusbwRankArgs args;
};

struct Subcommands {
  BusbwRankCommand busbw_rank;
  RunArgs run;
  BenchArgs bench;
  ReportArgs report;
  ProjectArgs project;
  CalibrateArgs calibrate;
  WorkerArgs worker;
  CollectArgs collect;
  GuiArgs gui;
  PerfArgs perf;
};

// The non-empty names of a comma-separated list, appended to `names`.
// "a,b" into its names; false (said on `err`, naming `flag`) when a name is empty (",,", "a,"),
// which would otherwise read as the flag left out: every section, every strategy.
bool split_commas(const char* flag, const std::string& list, std::vector<std::string>* names,
                  std::ostream& err) {
  std::stringstream stream(list);
  for (std::string name; std::getline(stream, name, ',');) names->push_back(name);
  const bool empty_name = std::find(names->begin(), names->end(), "") != names->end();
  if (!list.empty() && (empty_name || list.back() == ',')) {
    err << "error: " << flag << ": expected comma-separated names, none of them empty, got '"
        << list << "'\n";
    return false;
  }
  return true;
}

void add_run_subcommand(CLI::App& app, RunArgs* run) {
  run->app = app.add_subcommand("run",
                                "train a GPT under a strategy on N ranks (threads or processes) "
                                "and check it against a single-device reference");
  CLI::App& sub = *run->app;
  sub.add_option("--config", run->outputs.config_file, "JSON config file (flags override its keys)")
      ->group("Input");
  run->flags.add_to(sub);
  sub.add_flag("--no-reference", run->no_reference, "skip the single-device reference check")
      ->group("Check");
  run->tolerance =
      sub.add_option("--tolerance", run->outputs.tolerance,
                     "relative deviation ||w - ref|| / ||ref|| above which the exit code is 3 "
                     "(default 1e-5; 2e-2 when bf16 is used)")
          ->group("Check");
  add_output_options(sub, run->outputs.files, run->outputs.quiet);
}

void add_bench_subcommand(CLI::App& app, BenchArgs* bench) {
  bench->app = app.add_subcommand(
      "bench", "run several strategies under identical conditions and compare them in one table");
  CLI::App& sub = *bench->app;
  BenchOptions& options = bench->options;
  sub.add_option("--strategies", bench->strategies,
                 "comma-separated strategies (default: every registered one)")
      ->group("Bench");
  sub.add_option("--schedules", bench->schedules,
                 "comma-separated pipeline schedules, or all: a row for each, for every "
                 "strategy that runs a pipeline (default: the configured one)")
      ->group("Bench");
  sub.add_flag("--quick", options.quick, "a short run: tiny preset, 3 steps")->group("Bench");
  sub.add_option("--format", options.format, "table, csv, json or markdown")->group("Bench");
  sub.add_option("--out", options.out_dir, "also write each run's trace into DIR")->group("Bench");
  sub.add_flag("--measured", options.measured,
               "time steps by the measured wall clock instead of device time")
      ->group("Bench");
  sub.add_option("--hardware", options.hardware,
                 "device time's links: a hardware profile (default: cpu-10GbE on the CPU)")
      ->group("Bench");
  sub.add_option("--config", options.config_file, "JSON config file (flags override it)")
      ->group("Input");
  bench->flags.add_to(sub, bench_defaults(/*quick=*/false));
}

void add_report_subcommand(CLI::App& app, ReportArgs* report) {
  report->app =
      app.add_subcommand("report", "print per-rank overlap and collective metrics of a trace");
  CLI::App& sub = *report->app;
  sub.add_option("trace", report->files,
                 "trace file (native or Chrome JSON), a folder of them, or several PyTorch "
                 "profiler files of one job (one a rank)")
      ->required();
  sub.add_flag("--measured", report->options.measured,
               "the measured wall clock instead of device time (each rank on a device of its "
               "own)");
  sub.add_option("--hardware", report->options.hardware,
                 "device time's links: a hardware profile (default: cpu-10GbE for a CPU "
                 "trace, 8xH100 for a GPU trace)");
  sub.add_flag("--json", report->options.json,
               "print the per-rank figures (step_s, exposed_comm_s, overlap, "
               "bubble_fraction) as JSON instead of the tables");
}

void add_calibrate_subcommand(CLI::App& app, CalibrateArgs* calibrate) {
  calibrate->app = app.add_subcommand(
      "calibrate",
      "measure this machine (Gloo all_reduce, matmul rate, memory) and write the this-machine "
      "hardware profile for `project`");
  calibrate->app->add_option(
      "--out", calibrate->options.out,
      "where to write the profile (default: assets/hardware/this-machine.json)");
  calibrate->app->add_flag("--quick", calibrate->options.quick,
                           "fewer repetitions, smaller buffers");
}

void add_worker_subcommand(CLI::App& app, WorkerArgs* worker) {
  worker->app = app.add_subcommand(
      "worker",
      "train one rank of a multi-process run (what `run --mode processes` starts; torchrun or a "
      "scheduler can start it too): reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT");
  worker->app->add_option("--config", worker->config, "the run's JSON config")->required();
  worker->app->add_option("--out", worker->out, "directory for this rank's result and event log")
      ->required();
}

void add_collect_subcommand(CLI::App& app, CollectArgs* collect) {
  collect->app = app.add_subcommand(
      "collect",
      "summarise a run whose workers torchrun or a scheduler started: reads their --out folder "
      "(config.json, rank-R.json, rank-R.weights) and prints and writes what `run` does");
  CLI::App& sub = *collect->app;
  CollectOptions& options = collect->options;
  sub.add_option("dir", options.dir, "the workers' --out folder")->required();
  sub.add_flag("--reference", options.reference,
               "train the single-device reference here (from the folder's config) and "
               "compare")
      ->group("Check");
  sub.add_option("--tolerance", options.tolerance,
                 "relative deviation above which the exit code is 3 (default 1e-5; 2e-2 "
                 "when bf16 is used)")
      ->check(CLI::Range(0.0, 1e6))
      ->group("Check");
  add_output_options(sub, options.outputs, options.quiet);
}

void add_gui_subcommand(CLI::App& app, GuiArgs* gui_args) {
  gui_args->gui_app = app.add_subcommand(
      "gui",
      "the desktop app: launch runs and see their timelines, memory, weight sync, comparison and "
      "projection (no subcommand at all starts it too). Headless: xvfb-run -a -s '-screen 0 "
      "1920x1080x24' shardscope gui --open TRACE --screenshot out.png");
  CLI::App& sub = *gui_args->gui_app;
  gui::GuiOptions& options = gui_args->options;
  sub.add_option("--open", options.open_files, "trace files to load (native or Chrome JSON)");
  sub.add_option("--screenshot", options.screenshot,
                 "render, write the last frame to this PNG and exit");
  sub.add_option("--frames", options.frames,
                 "frames to render (after the script) before the screenshot and exit (at most "
                 "3600, a minute's worth, as a script's `frames`)")
      ->check(CLI::Range(0, 3600));
  sub.add_option("--script", options.script,
                 "replay actions from this file (open, tab, range, click, select, set, run, "
                 "wait-runs, project, screenshot, state; see app/gui/gui_script.h)");
  sub.add_option("--state", options.state_out,
                 "write the GUI state (selection, hovered event, visible range...) as JSON");
  sub.add_option("--tab", options.tab,
                 "tab to show first: launch, timeline, memory, sync, compare, what-if");
  sub.add_option("--size", gui_args->size, "window size WIDTHxHEIGHT (default 1600x900)");
  sub.add_flag("--measured", options.measured,
               "show the measured wall clock (ranks that shared a device contended for it) "
               "instead of device time");
  sub.add_option("--hardware", options.hardware,
                 "device time's links: a hardware profile name or .json (default: cpu-10GbE "
                 "for a CPU trace, 8xH100 for a GPU trace)");
}

void add_view_subcommand(CLI::App& app, GuiArgs* gui_args) {
  gui_args->view_app = app.add_subcommand(
      "view", "open a trace in the desktop app (one recorded on a GPU machine, on a laptop)");
  CLI::App& sub = *gui_args->view_app;
  sub.add_option("trace", gui_args->view_files,
                 "trace file (native or Chrome JSON), a folder of rank traces, or several "
                 "PyTorch profiler files of one job (one a rank)")
      ->required();
  sub.add_option("--screenshot", gui_args->options.screenshot, "write a PNG and exit");
  sub.add_option("--tab", gui_args->options.tab, "tab to show first");
  sub.add_flag("--measured", gui_args->options.measured, "show the measured wall clock");
  sub.add_option("--hardware", gui_args->options.hardware, "device time's hardware profile");
}

void add_busbw_rank_subcommand(CLI::App& app, BusbwRankCommand* command) {
  command->app =
      app.add_subcommand("perf-busbw-rank", "one rank process of `perf`'s busbw timings");
  command->app->group("");  // started by `perf`, not by people
  perf::BusbwRankArgs& a = command->args;
  command->app->add_option("--rank", a.rank)->required();
  command->app->add_option("--world", a.world)->required()->check(CLI::Range(1, 64));
  command->app->add_option("--backend", a.backend)->required();
  command->app->add_option("--dir", a.dir)->required()->check(CLI::ExistingDirectory);
  command->app->add_option("--sizes", a.sizes)->required()->delimiter(',');
  command->app->add_option("--rounds", a.rounds)->check(CLI::Range(1, 100));
  command->app->add_option("--device", a.device);
}

void add_perf_subcommand(CLI::App& app, PerfArgs* perf_args) {
  perf_args->app = app.add_subcommand(
      "perf",
      "the performance suite: ours against the plain libraries, side by side (engine and "
      "tracing overhead, collectives vs the raw process group, our DDP vs PyTorch's, start-up, "
      "GUI frame and load times, scaling with world and model size), as one table");
  CLI::App& sub = *perf_args->app;
  sub.add_flag("--quick", perf_args->options.quick, "fewer rounds, smaller cases (about a minute)");
  sub.add_option("--only", perf_args->only,
                 "comma-separated sections: engine, tracing, collectives, backends, ddp, startup, "
                 "gui, scaling, host-ops (default: all)");
  sub.add_option("--format", perf_args->format, "table, markdown or json");
  sub.add_option("--trace", perf_args->options.trace,
                 "gui: time opening and drawing this trace instead of a synthetic one (a file, "
                 "a folder of rank traces)");
  sub.add_option("--device", perf_args->options.device,
                 "engine, host-ops and backends: run on this device (cpu or cuda:N)")
      ->capture_default_str();
  sub.add_option("--precision", perf_args->options.precision,
                 "engine: fp32, or bf16 autocast as `run --precision bf16`")
      ->capture_default_str();
}

// Parses `args`; an exit code when that is all there is to do (help, the version, an error).
// `with_help`: the subcommands whose own --help is shown; for the others, the app's.
std::optional<int> parse_args(CLI::App& app, const std::vector<CLI::App*>& with_help,
                              const std::vector<std::string>& args, std::ostream& out,
                              std::ostream& err) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion&) {
    out << app.version() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    // CLI11 reports `run --help` through the subcommand; show that subcommand's help.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      for (CLI::App* sub : with_help) {
        if (sub->parsed()) {
          out << sub->help();
          return kExitOk;
        }
      }
      out << app.help();
      return kExitOk;
    }
    err << "error: " << e.what() << "\n"
        << "run 'shardscope --help' for usage\n";
    return kExitBadInput;
  }
  return std::nullopt;
}

// The first option of the command line given an empty value (--trace ""), which would otherwise
// read as the option left out: an output silently not written, a screenshot that never ends.
std::optional<std::string> option_given_empty(const CLI::App& app) {
  std::vector<const CLI::App*> apps = {&app};
  for (const CLI::App* sub : app.get_subcommands()) apps.push_back(sub);
  for (const CLI::App* a : apps) {
    for (const CLI::Option* opt : a->get_options()) {
      if (opt->count() == 0 || opt->get_type_size() == 0) continue;
      for (const std::string& value : opt->results()) {
        if (value.empty()) return opt->get_name();
      }
    }
  }
  return std::nullopt;
}

// The actions of the script at `path`, or none where it cannot be read or parsed.
std::vector<gui::ScriptAction> script_actions(const std::string& path) {
  if (path.empty()) return {};
  try {
    return gui::read_script_file(path);
  } catch (const std::exception&) {
    return {};
  }
}

// `gui`, `view` or no subcommand at all.
int dispatch_gui(const CLI::App& app, GuiArgs& gui_args, std::ostream& out, std::ostream& err) {
  if (app.got_subcommand("view")) {
    auto& o = gui_args.options;
    if (gui_args.view_files.size() == 1)
      o.open_files.push_back(gui_args.view_files[0]);
    else
      o.open_job = gui_args.view_files;  // one job: a rank a file
  }
  if (!gui_args.size.empty()) {
    const size_t x = gui_args.size.find('x');
    try {
      if (x == std::string::npos) throw std::invalid_argument(gui_args.size);
      size_t used_w = 0, used_h = 0;
      const std::string w = gui_args.size.substr(0, x), h = gui_args.size.substr(x + 1);
      gui_args.options.width = std::stoi(w, &used_w);
      gui_args.options.height = std::stoi(h, &used_h);
      if (used_w != w.size() || used_h != h.size()) throw std::invalid_argument(gui_args.size);
    } catch (const std::exception&) {
      err << "error: --size: expected WIDTHxHEIGHT, got '" << gui_args.size << "'\n";
      return kExitBadInput;
    }
    // A window (and a screenshot's image) the display can hold: 100000x100000 ended in an X
    // error after the window failed to map.
    constexpr int kLeast = 200, kMost = 8192;
    if (gui_args.options.width < kLeast || gui_args.options.height < kLeast ||
        gui_args.options.width > kMost || gui_args.options.height > kMost) {
      err << "error: --size: each side from " << kLeast << " to " << kMost << " pixels, got '"
          << gui_args.size << "'\n";
      return kExitBadInput;
    }
  }
  // What the app writes at its end, checked as a run's outputs are: never over what it reads,
  // never a FIFO it would block on, a folder or a device.
  std::vector<OutputClaim> claims;  // held while the app runs
  try {
    const gui::GuiOptions& o = gui_args.options;
    std::vector<std::string> traces = o.open_files;
    traces.insert(traces.end(), o.open_job.begin(), o.open_job.end());
    std::vector<OutputFile> outputs = {{"--screenshot", o.screenshot, false, false},
                                       {"--state", o.state_out, false, false}};
    // A script's own outputs (screenshot, state, save) and the traces it opens, checked the same
    // way; a script that cannot be read or parsed is the app's to refuse, naming its line.
    for (const gui::ScriptAction& a : script_actions(o.script)) {
      if (a.args.empty()) continue;
      if (a.verb == "open") traces.push_back(a.args[0]);
      if (a.verb == "screenshot" || a.verb == "state" || a.verb == "save")
        outputs.push_back({"--script line " + std::to_string(a.line) + " (" + a.verb + ")",
                           a.args[0], false, false});
    }
    std::vector<InputFile> inputs = trace_inputs(traces);
    inputs.push_back({"--script", o.script});
    add_hardware_input(o.hardware, inputs);
    claims = check_outputs(outputs, inputs);
  } catch (const ConfigError& e) {
    err << "error: " << e.what() << "\n";
    return kExitBadInput;
  }
  std::string why;
  if (app.get_subcommands().empty() && !gui::have_display(&why)) {
    err << why << "\n\n" << app.help();
    return kExitBadInput;
  }
  return gui::gui_main(gui_args.options, out, err);
}

int dispatch_perf(PerfArgs& perf_args, std::ostream& out, std::ostream& err) {
  if (perf_args.format != "table" && perf_args.format != "markdown" && perf_args.format != "json") {
    err << "error: --format: unknown format '" << perf_args.format << "' (table, markdown, json)\n";
    return kExitBadInput;
  }
  if (!split_commas("--only", perf_args.only, &perf_args.options.sections, err))
    return kExitBadInput;
  try {
    // The engine section's device and precision, checked as `run` checks them, before any work.
    Config config =
        config_from_json({{"device", perf_args.options.device},
                          {"strategy_options", {{"precision", perf_args.options.precision}}}});
    finalize(config);
    check_environment(config);
  } catch (const ConfigError& e) {
    err << "error: " << (e.field() == "device" ? "--device" : "--precision") << ": "
        << std::string(e.what()).substr(e.field().size() + 2) << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    err << "error: --device: " << e.what() << "\n";
    return kExitBadInput;
  }
  if (!perf_args.options.trace.empty()) {
    // A trace that does not open is bad input, found before the suite starts.
    try {
      analysis::open_trace_path(perf_args.options.trace);
    } catch (const std::exception& e) {
      err << "error: --trace: " << e.what() << "\n";
      return kExitBadInput;
    }
  }
  perf_args.options.progress = [&err](const std::string& line) { err << line << "\n"; };
  try {
    const auto rows = perf::run_suite(perf_args.options);
    perf::print_rows(rows, perf_args.format, out);
    return kExitOk;
  } catch (const std::invalid_argument& e) {
    err << "error: --only: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    err << "error: perf: " << e.what() << "\n";
    return kExitRunFailed;
  }
}

int dispatch_bench(BenchArgs& bench, std::ostream& out, std::ostream& err) {
  if (!split_commas("--strategies", bench.strategies, &bench.options.strategies, err) ||
      !split_commas("--schedules", bench.schedules, &bench.options.schedules, err))
    return kExitBadInput;
  // Progress redraws one line in place, which only a terminal shows as meant.
  bench.options.live_progress = &err == &std::cerr && isatty(STDERR_FILENO);
  return bench_command(bench.flags, bench.options, out, err);
}

int print_strategies(std::ostream& out) {
  for (const auto& name : StrategyRegistry::instance().names()) {
    const StrategyInfo* info = StrategyRegistry::instance().find(name);
    out << name << "  " << info->description
        << (info->traits.data_parallel_sync ? " (also a --dp-sync for tp/pp)" : "") << "\n";
  }
  return kExitOk;
}

int print_presets(std::ostream& out) {
  for (const auto& name : preset_names()) {
    ModelConfig m = preset_model(name);
    out << name << "  d_model " << m.d_model << ", heads " << m.heads << ", layers " << m.layers
        << ", seq " << m.seq << ", vocab " << m.vocab << "\n";
  }
  return kExitOk;
}

int dispatch_run(RunArgs& run, const std::vector<std::string>& args, std::ostream& out,
                 std::ostream& err) {
  run.outputs.tolerance_given = run.tolerance->count() > 0;
  run.outputs.command = {"shardscope"};
  run.outputs.command.insert(run.outputs.command.end(), args.begin(), args.end());
  return run_command(run.flags, run.outputs, run.no_reference, out, err);
}

}  // namespace

int cli_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "shardscope: a single-node multi-GPU simulator and visual profiler for distributed training"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string("shardscope " SHARDSCOPE_VERSION " (LibTorch ") +
                                        SHARDSCOPE_TORCH_VERSION_STRING + ")");

  // In the order --help lists them.
  Subcommands cmd;
  add_run_subcommand(app, &cmd.run);
  add_bench_subcommand(app, &cmd.bench);
  add_report_subcommand(app, &cmd.report);
  app.add_subcommand("strategies", "list the registered strategies");
  app.add_subcommand("presets", "list the model presets");
  add_project_subcommand(app, &cmd.project);
  add_calibrate_subcommand(app, &cmd.calibrate);
  add_worker_subcommand(app, &cmd.worker);
  add_collect_subcommand(app, &cmd.collect);
  add_gui_subcommand(app, &cmd.gui);
  add_view_subcommand(app, &cmd.gui);
  add_perf_subcommand(app, &cmd.perf);
  add_busbw_rank_subcommand(app, &cmd.busbw_rank);

  if (const std::optional<int> done = parse_args(
          app,
          {cmd.run.app, cmd.bench.app, cmd.report.app, cmd.worker.app, cmd.collect.app,
           cmd.project.app, cmd.calibrate.app, cmd.gui.gui_app, cmd.gui.view_app, cmd.perf.app},
          args, out, err)) {
    return *done;
  }
  if (const std::optional<std::string> empty = option_given_empty(app)) {
    err << "error: " << *empty
        << ": given an empty value, which names nothing (leave it out for its default)\n";
    return kExitBadInput;
  }

  if (app.got_subcommand("gui") || app.got_subcommand("view") || app.get_subcommands().empty()) {
    return dispatch_gui(app, cmd.gui, out, err);
  }
  if (app.got_subcommand("perf")) return dispatch_perf(cmd.perf, out, err);
  if (app.got_subcommand("perf-busbw-rank")) {
    try {
      return perf::busbw_rank_main(cmd.busbw_rank.args);
    } catch (const std::exception& e) {
      err << "error: perf-busbw-rank: " << e.what() << "\n";
      return 2;
    }
  }
  if (app.got_subcommand("report")) {
    return report_command(cmd.report.files, cmd.report.options, out, err);
  }
  if (app.got_subcommand("worker")) return worker_command(cmd.worker.config, cmd.worker.out, err);
  if (app.got_subcommand("collect")) return collect_command(cmd.collect.options, out, err);
  if (app.got_subcommand("calibrate")) return calibrate_command(cmd.calibrate.options, out, err);
  if (app.got_subcommand("project")) return dispatch_project(cmd.project, out, err);
  if (app.got_subcommand("bench")) return dispatch_bench(cmd.bench, out, err);
  if (app.got_subcommand("strategies")) return print_strategies(out);
  if (app.got_subcommand("presets")) return print_presets(out);
  return dispatch_run(cmd.run, args, out, err);
}

}  // namespace shardscope::cli
