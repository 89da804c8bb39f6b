#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/bench_command.h"
#include "app/calibrate_command.h"
#include "app/cli_flags.h"
#include "app/cli_main.h"
#include "app/collect_command.h"
#include "app/gui/gui_app.h"
#include "app/perf/perf_suite.h"
#include "app/project_command.h"
#include "app/report_command.h"
#include "app/run_command.h"
#include "app/run_outputs.h"
#include "app/trace_output.h"
#include "app/worker_command.h"
#include "engine/config.h"
#include "engine/strategy_registry.h"
#include "engine/weights.h"
#include "engine/weights_file.h"
#include "profiling/trace_io.h"

namespace shardscope::cli {

int cli_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "shardscope: a single-node multi-GPU simulator and visual profiler for distributed training"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string("shardscope " SHARDSCOPE_VERSION " (LibTorch ") +
                                        SHARDSCOPE_TORCH_VERSION_STRING + ")");

  CLI::App* run =
      app.add_subcommand("run",
                         "train a GPT under a strategy on N ranks (threads or processes) "
                         "and check it against a single-device reference");
  RunFlags flags;
  RunOutputs outputs;
  bool no_reference = false;
  run->add_option("--config", outputs.config_file, "JSON config file (flags override its keys)")
      ->group("Input");
  flags.add_to(*run);
  run->add_flag("--no-reference", no_reference, "skip the single-device reference check")
      ->group("Check");
  CLI::Option* tolerance =
      run->add_option("--tolerance", outputs.tolerance,
                      "relative deviation ||w - ref|| / ||ref|| above which the exit code is 3 "
                      "(default 1e-5; 2e-2 when bf16 is used)")
          ->group("Check");
  add_output_options(*run, outputs.files, outputs.quiet);

  RunFlags bench_flags;
  BenchOptions bench_options;
  std::string bench_strategies, bench_schedules;
  CLI::App* bench = app.add_subcommand(
      "bench", "run several strategies under identical conditions and compare them in one table");
  bench
      ->add_option("--strategies", bench_strategies,
                   "comma-separated strategies (default: every registered one)")
      ->group("Bench");
  bench
      ->add_option("--schedules", bench_schedules,
                   "comma-separated pipeline schedules, or all: a row for each, for every "
                   "strategy that runs a pipeline (default: the configured one)")
      ->group("Bench");
  bench->add_flag("--quick", bench_options.quick, "a short run: tiny preset, 3 steps")
      ->group("Bench");
  bench->add_option("--format", bench_options.format, "table, csv, json or markdown")
      ->group("Bench");
  bench->add_option("--out", bench_options.out_dir, "also write each run's trace into DIR")
      ->group("Bench");
  bench
      ->add_flag("--measured", bench_options.measured,
                 "time steps by the measured wall clock instead of device time")
      ->group("Bench");
  bench
      ->add_option("--hardware", bench_options.hardware,
                   "device time's links: a hardware profile (default: cpu-10GbE on the CPU)")
      ->group("Bench");
  bench->add_option("--config", bench_options.config_file, "JSON config file (flags override it)")
      ->group("Input");
  bench_flags.add_to(*bench);
  std::string report_file;
  CLI::App* report =
      app.add_subcommand("report", "print per-rank overlap and collective metrics of a trace");
  report->add_option("trace", report_file, "trace file (native or Chrome JSON)")->required();
  ReportOptions report_options;
  report->add_flag("--measured", report_options.measured,
                   "the measured wall clock instead of device time (each rank on a device of its "
                   "own)");
  report->add_option("--hardware", report_options.hardware,
                     "device time's links: a hardware profile (default: cpu-10GbE for a CPU "
                     "trace, 8xH100 for a GPU trace)");
  report->add_flag("--json", report_options.json,
                   "print the per-rank figures (step_s, exposed_comm_s, overlap, "
                   "bubble_fraction) as JSON instead of the tables");
  app.add_subcommand("strategies", "list the registered strategies");
  app.add_subcommand("presets", "list the model presets");
  RunFlags project_flags;
  ProjectOptions project_options;
  CLI::App* project = app.add_subcommand(
      "project",
      "predict on a hardware profile: a recorded run replayed there (TRACE), one collective's "
      "time and bandwidth (--collective), or a model's memory per GPU under every data / tensor "
      "/ pipeline layout and ZeRO stage (--memory)");
  project
      ->add_option("--hardware", project_options.hardware,
                   "hardware profile name (assets/hardware) or .json path (default 8xH100)")
      ->group("Projection");
  project
      ->add_option("--collective", project_options.collective,
                   "all_reduce, all_gather_into, reduce_scatter_tensor, broadcast, reduce, "
                   "all_to_all, send")
      ->group("Projection");
  project
      ->add_option("--bytes", project_options.bytes,
                   "size of the collective's buffer, e.g. 1GiB (default: a sweep 8 B .. 1 GiB)")
      ->group("Projection");
  CLI::Option* project_ranks =
      project->add_option("--ranks", project_options.ranks, "ranks (default: every GPU)")
          ->group("Projection");
  project->add_option("--algorithm", project_options.algorithm, "ring, tree or auto")
      ->group("Projection");
  project->add_option("trace", project_options.trace,
                      "a recorded trace to replay onto the hardware (native or Chrome JSON)");
  project
      ->add_option("--compute-scale", project_options.compute_scale,
                   "trace replay: projected / measured compute time (default: the measuring "
                   "device's matmul rate against the target's, or half its peak)")
      ->group("Projection");
  project->add_option("--out", project_options.out, "trace replay: write the projected trace here")
      ->group("Projection");
  project
      ->add_flag("--json", project_options.json,
                 "trace replay: print the measured and projected per-rank figures (step_s, "
                 "exposed_comm_s, overlap, bubble_fraction) as JSON")
      ->group("Projection");
  project
      ->add_flag("--memory", project_options.memory,
                 "per-GPU memory of the model (--preset and model flags) under each layout")
      ->group("Projection");
  project
      ->add_flag("--fp32", project_options.fp32,
                 "--memory: fp32 Adam (4+4+8 bytes per parameter) instead of bf16 mixed "
                 "precision (2+2+12)")
      ->group("Projection");
  project_flags.add_to(*project);
  CalibrateOptions calibrate_options;
  CLI::App* calibrate = app.add_subcommand(
      "calibrate",
      "measure this machine (Gloo all_reduce, matmul rate, memory) and write the this-machine "
      "hardware profile for `project`");
  calibrate->add_option("--out", calibrate_options.out,
                        "where to write the profile (default: assets/hardware/this-machine.json)");
  calibrate->add_flag("--quick", calibrate_options.quick, "fewer repetitions, smaller buffers");
  std::string worker_config, worker_out;
  CLI::App* worker = app.add_subcommand(
      "worker",
      "train one rank of a multi-process run (what `run --mode processes` starts; torchrun or a "
      "scheduler can start it too): reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT");
  worker->add_option("--config", worker_config, "the run's JSON config")->required();
  worker->add_option("--out", worker_out, "directory for this rank's result and event log")
      ->required();
  CollectOptions collect_options;
  CLI::App* collect = app.add_subcommand(
      "collect",
      "summarise a run whose workers torchrun or a scheduler started: reads their --out folder "
      "(config.json, rank-R.json, rank-R.weights) and prints and writes what `run` does");
  collect->add_option("dir", collect_options.dir, "the workers' --out folder")->required();
  collect
      ->add_flag("--reference", collect_options.reference,
                 "train the single-device reference here (from the folder's config) and "
                 "compare")
      ->group("Check");
  collect
      ->add_option("--tolerance", collect_options.tolerance,
                   "relative deviation above which the exit code is 3 (default 1e-5; 2e-2 "
                   "when bf16 is used)")
      ->check(CLI::NonNegativeNumber)
      ->group("Check");
  add_output_options(*collect, collect_options.outputs, collect_options.quiet);

  gui::GuiOptions gui_options;
  std::string gui_size;
  CLI::App* gui_app = app.add_subcommand(
      "gui",
      "the desktop app: launch runs and see their timelines, memory, weight sync, comparison and "
      "projection (no subcommand at all starts it too). Headless: xvfb-run -a -s '-screen 0 "
      "1920x1080x24' shardscope gui --open TRACE --screenshot out.png");
  gui_app->add_option("--open", gui_options.open_files,
                      "trace files to load (native or Chrome JSON)");
  gui_app->add_option("--screenshot", gui_options.screenshot,
                      "render, write the last frame to this PNG and exit");
  gui_app
      ->add_option("--frames", gui_options.frames,
                   "frames to render (after the script) before the screenshot and exit")
      ->check(CLI::NonNegativeNumber);
  gui_app->add_option("--script", gui_options.script,
                      "replay actions from this file (open, tab, range, click, select, set, run, "
                      "wait-runs, project, screenshot, state; see app/gui/gui_script.h)");
  gui_app->add_option("--state", gui_options.state_out,
                      "write the GUI state (selection, hovered event, visible range...) as JSON");
  gui_app->add_option("--tab", gui_options.tab,
                      "tab to show first: launch, timeline, memory, sync, compare, what-if");
  gui_app->add_option("--size", gui_size, "window size WIDTHxHEIGHT (default 1600x900)");
  {
    CLI::App* sub = gui_app;
    sub->add_flag("--measured", gui_options.measured,
                  "show the measured wall clock (ranks that shared a device contended for it) "
                  "instead of device time");
    sub->add_option("--hardware", gui_options.hardware,
                    "device time's links: a hardware profile name or .json (default: cpu-10GbE "
                    "for a CPU trace, 8xH100 for a GPU trace)");
  }
  std::string view_file;
  CLI::App* view = app.add_subcommand(
      "view", "open a trace in the desktop app (one recorded on a GPU machine, on a laptop)");
  view->add_option("trace", view_file, "trace file (native or Chrome JSON)")->required();
  view->add_option("--screenshot", gui_options.screenshot, "write a PNG and exit");
  view->add_option("--tab", gui_options.tab, "tab to show first");
  view->add_flag("--measured", gui_options.measured, "show the measured wall clock");
  view->add_option("--hardware", gui_options.hardware, "device time's hardware profile");

  perf::PerfOptions perf_options;
  std::string perf_only, perf_format = "table";
  CLI::App* perf_app = app.add_subcommand(
      "perf",
      "the performance suite: ours against the plain libraries, side by side (engine and "
      "tracing overhead, collectives vs the raw process group, our DDP vs PyTorch's, start-up, "
      "GUI frame and load times, scaling with world and model size), as one table");
  perf_app->add_flag("--quick", perf_options.quick, "fewer rounds, smaller cases (about a minute)");
  perf_app->add_option("--only", perf_only,
                       "comma-separated sections: engine, tracing, collectives, ddp, startup, gui, "
                       "scaling (default: all)");
  perf_app->add_option("--format", perf_format, "table, markdown or json");

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
      for (CLI::App* sub :
           {run, bench, report, worker, collect, project, calibrate, gui_app, view, perf_app}) {
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

  if (app.got_subcommand("gui") || app.got_subcommand("view") || app.get_subcommands().empty()) {
    if (app.got_subcommand("view")) gui_options.open_files.push_back(view_file);
    if (!gui_size.empty()) {
      const size_t x = gui_size.find('x');
      try {
        if (x == std::string::npos) throw std::invalid_argument(gui_size);
        gui_options.width = std::stoi(gui_size.substr(0, x));
        gui_options.height = std::stoi(gui_size.substr(x + 1));
      } catch (const std::exception&) {
        err << "error: --size: expected WIDTHxHEIGHT, got '" << gui_size << "'\n";
        return kExitBadInput;
      }
    }
    std::string why;
    if (app.get_subcommands().empty() && !gui::have_display(&why)) {
      err << why << "\n\n" << app.help();
      return kExitBadInput;
    }
    return gui::gui_main(gui_options, out, err);
  }
  if (app.got_subcommand("perf")) {
    if (perf_format != "table" && perf_format != "markdown" && perf_format != "json") {
      err << "error: --format: unknown format '" << perf_format << "' (table, markdown, json)\n";
      return kExitBadInput;
    }
    std::stringstream list(perf_only);
    for (std::string name; std::getline(list, name, ',');) {
      if (!name.empty()) perf_options.sections.push_back(name);
    }
    perf_options.progress = [&err](const std::string& line) { err << line << "\n"; };
    try {
      const auto rows = perf::run_suite(perf_options);
      perf::print_rows(rows, perf_format, out);
      return kExitOk;
    } catch (const std::invalid_argument& e) {
      err << "error: --only: " << e.what() << "\n";
      return kExitBadInput;
    } catch (const std::exception& e) {
      err << "error: perf: " << e.what() << "\n";
      return kExitRunFailed;
    }
  }
  if (app.got_subcommand("report")) return report_command(report_file, report_options, out, err);
  if (app.got_subcommand("worker")) return worker_command(worker_config, worker_out, err);
  if (app.got_subcommand("collect")) return collect_command(collect_options, out, err);
  if (app.got_subcommand("calibrate")) return calibrate_command(calibrate_options, out, err);
  if (app.got_subcommand("project")) {
    Config config;
    try {
      config = config_from_json(project_flags.config_overrides(""));
    } catch (const ConfigError& e) {
      err << "error: " << RunFlags::describe_key(e.field()) << ": "
          << std::string(e.what()).substr(e.field().size() + 2) << "\n";
      return kExitBadInput;
    }
    project_options.ranks_given = project_ranks->count() > 0;
    project_options.micro_batch = config.micro_batch;
    project_options.micro_batches = config.strategy_options.micro_batches;
    return project_command(project_options, config, out, err);
  }
  if (app.got_subcommand("bench")) {
    std::stringstream list(bench_strategies);
    for (std::string name; std::getline(list, name, ',');) {
      if (!name.empty()) bench_options.strategies.push_back(name);
    }
    std::stringstream schedules(bench_schedules);
    for (std::string name; std::getline(schedules, name, ',');) {
      if (!name.empty()) bench_options.schedules.push_back(name);
    }
    bench_options.live_progress = &err == &std::cerr && isatty(STDERR_FILENO);
    return bench_command(bench_flags, bench_options, out, err);
  }
  if (app.got_subcommand("strategies")) {
    for (const auto& name : StrategyRegistry::instance().names()) {
      const StrategyInfo* info = StrategyRegistry::instance().find(name);
      out << name << "  " << info->description
          << (info->traits.data_parallel_sync ? " (also a --dp-sync for tp/pp)" : "") << "\n";
    }
    return kExitOk;
  }
  if (app.got_subcommand("presets")) {
    for (const auto& name : preset_names()) {
      ModelConfig m = preset_model(name);
      out << name << "  d_model " << m.d_model << ", heads " << m.heads << ", layers " << m.layers
          << ", seq " << m.seq << ", vocab " << m.vocab << "\n";
    }
    return kExitOk;
  }
  outputs.tolerance_given = tolerance->count() > 0;
  outputs.command = {"shardscope"};
  outputs.command.insert(outputs.command.end(), args.begin(), args.end());
  return run_command(flags, outputs, no_reference, out, err);
}

}  // namespace shardscope::cli
