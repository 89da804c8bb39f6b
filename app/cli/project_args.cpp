#include "app/cli/project_args.h"

#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/exit_code.h"
#include "engine/train/config.h"

namespace shardscope::cli {

void add_project_subcommand(CLI::App& app, ProjectArgs* project) {
  project->app = app.add_subcommand(
      "project",
      "predict on a hardware profile: a recorded run replayed there (TRACE), one collective's "
      "time and bandwidth (--collective), a model's memory per GPU under every data / tensor "
      "/ pipeline layout and ZeRO stage (--memory), or, with none of these, one step of the "
      "configuration the run flags describe (--strategy, --world, --tp, --pp, model flags, "
      "--global-batch; bf16 mixed precision, the default here), however big, priced kernel by "
      "kernel");
  CLI::App& sub = *project->app;
  ProjectOptions& options = project->options;
  sub.add_option("--hardware", options.hardware,
                 "hardware profile name (assets/hardware) or .json path (default 8xH100)")
      ->group("Projection");
  sub.add_option("--collective", options.collective,
                 "all_reduce, all_gather_into, reduce_scatter_tensor, broadcast, reduce, "
                 "all_to_all, send")
      ->group("Projection");
  sub.add_option("--bytes", options.bytes,
                 "size of the collective's buffer, e.g. 1GiB (default: a sweep 8 B .. 1 GiB)")
      ->group("Projection");
  project->ranks =
      sub.add_option("--ranks", options.ranks, "ranks (default: every GPU)")->group("Projection");
  sub.add_option("--algorithm", options.algorithm, "ring, tree or auto")->group("Projection");
  sub.add_option("trace", options.traces,
                 "a recorded trace to replay onto the hardware (native or Chrome JSON), a folder "
                 "of rank traces, or several PyTorch profiler files of one job (one a rank); "
                 "a run of ours has its kernels priced on the profile's GPU in bf16, or in fp32 "
                 "with --precision fp32");
  sub.add_option("--compute-scale", options.compute_scale,
                 "trace replay: projected / measured compute time (default: the measuring "
                 "device's matmul rate against the target's, or half its peak)")
      ->group("Projection");
  sub.add_option("--out", options.out,
                 "trace replay or a configuration: write the projected trace here")
      ->group("Projection");
  sub.add_flag("--json", options.json,
               "print the figures as JSON: a trace replay's measured and projected per-rank "
               "figures (step_s, exposed_comm_s, overlap, bubble_fraction), a configuration's "
               "step_s, mfu, peak_bytes and breakdown")
      ->group("Projection");
  sub.add_option("--nodes", options.nodes,
                 "nodes of the hardware profile (default: the profile's; more need its 'inter' "
                 "link)")
      ->group("Projection");
  sub.add_flag("--search", options.search,
               "with a model and --world (and --nodes): the fastest tp x pp x dp layouts, "
               "schedules, micro-batches, recompute and ZeRO stages that fit in memory")
      ->group("Projection");
  sub.add_flag("--memory", options.memory,
               "per-GPU memory of the model (--preset and model flags) under each layout")
      ->group("Projection");
  sub.add_flag("--fp32", options.fp32,
               "--memory: fp32 Adam (4+4+8 bytes per parameter) instead of bf16 mixed "
               "precision (2+2+12)")
      ->group("Projection");
  project->flags.add_to(sub);
  sub.get_option("--precision")->default_str(kProjectedPrecision);
}

int dispatch_project(ProjectArgs& project, std::ostream& out, std::ostream& err) {
  Config config;
  try {
    nlohmann::json overrides = project.flags.config_overrides("");
    project.options.configured = !overrides.empty();
    project.options.run_keys = project.flags.given_keys();
    // An explicit --precision fp32 stays, and the projection refuses it, naming the flag.
    if (!overrides.contains("strategy_options") ||
        !overrides["strategy_options"].contains("precision"))
      overrides["strategy_options"]["precision"] = kProjectedPrecision;
    config = config_from_json(overrides);
  } catch (const ConfigError& e) {
    err << "error: " << RunFlags::describe_key(e.field()) << ": "
        << std::string(e.what()).substr(e.field().size() + 2) << "\n";
    return kExitBadInput;
  }
  project.options.ranks_given = project.ranks->count() > 0;
  project.options.micro_batch = config.micro_batch;
  project.options.micro_batches = config.strategy_options.micro_batches;
  return project_command(project.options, config, out, err);
}

}  // namespace shardscope::cli
