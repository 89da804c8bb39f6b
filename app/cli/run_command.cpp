#include "app/cli/run_command.h"

#include <cmath>
#include <ostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli/cli_flags.h"
#include "app/cli/exit_code.h"
#include "app/cli/run_summary_text.h"
#include "engine/launch/stop_request.h"
#include "engine/state/checkpoint.h"
#include "engine/train/config.h"
#include "engine/train/run.h"

namespace shardscope::cli {
namespace {

// The command that continues this run: as typed, with --resume DIR in place of any earlier one
// and without an injected fault (a rehearsal of a failure, not part of the run).
std::string resume_command(const std::vector<std::string>& command, const std::string& dir) {
  auto dropped = [](const std::string& word, bool* takes_value) {
    for (const std::string flag : {"--resume", "--inject-fault"}) {
      *takes_value = word == flag;
      if (*takes_value || word.rfind(flag + "=", 0) == 0) return true;
    }
    return false;
  };
  std::string text;
  auto append = [&](const std::string& word) {
    const bool plain =
        !word.empty() && word.find_first_of(" \t'\"$\\`*?;&|<>()") == std::string::npos;
    text += (text.empty() ? "" : " ") + (plain ? word : "'" + word + "'");
  };
  for (size_t i = 0; i < command.size(); ++i) {
    bool takes_value = false;
    if (dropped(command[i], &takes_value)) {
      if (takes_value) ++i;  // and its value
      continue;
    }
    append(command[i]);
  }
  append("--resume");
  append(dir);
  return text;
}

}  // namespace

void add_output_options(CLI::App& command, OutputFiles& files, bool& quiet) {
  command.add_option("--json", files.json, "write a machine-readable summary here")
      ->type_name("FILE")
      ->group("Output");
  command
      .add_option("--trace", files.trace,
                  "write the trace: FILE.json as Chrome trace JSON (Perfetto, chrome://tracing), "
                  "DIR/ as one Kineto file per rank (Holistic Trace Analysis) plus "
                  "DIR/trace.sst, any other name in the native format (for `shardscope report` "
                  "and the GUI)")
      ->type_name("FILE|DIR/")
      ->group("Output");
  command
      .add_option("--export-weights", files.weights,
                  "write the trained full weights (name -> tensor): FILE.safetensors as "
                  "safetensors, any other name for Python's torch.load")
      ->type_name("FILE")
      ->group("Output");
  command.add_flag("--quiet", quiet, "print only the final check")->group("Output");
}

int run_command(RunFlags& flags, RunOutputs outputs, bool no_reference, std::ostream& out,
                std::ostream& err) {
  Config config;
  std::string backend_choice;
  std::vector<OutputClaim> claims;  // held until the outputs are written
  try {
    config = config_from_json(flags.config_overrides(outputs.config_file));
    if (no_reference) config.reference = false;
    if (outputs.tolerance_given && !std::isfinite(outputs.tolerance))
      throw ConfigError("tolerance", "must be a finite number");
    if (outputs.tolerance_given && !(outputs.tolerance >= 0))
      throw ConfigError("tolerance", "must not be negative");
    finalize(config);
    if (!outputs.tolerance_given) outputs.tolerance = default_tolerance(config);
    backend_choice = check_environment(config);
    // "auto" and "synthetic" name built-in corpora, not files.
    const bool data_is_file = config.data != "auto" && config.data != "synthetic";
    claims =
        check_output_files(outputs.files, {{"--data", data_is_file ? config.data : ""},
                                           {"--config", outputs.config_file},
                                           {"--init-weights", config.init_weights},
                                           {"--resume", config.resume},
                                           {"--resume", checkpoint_root_of(config.resume), true},
                                           {"--checkpoint-dir", config.checkpoint_dir, true}});
  } catch (const ConfigError& e) {
    err << "error: " << RunFlags::describe_key(e.field()) << ": "
        << std::string(e.what()).substr(e.field().size() + 2) << "\n";
    return kExitBadInput;
  }

  RunSummary summary;
  try {
    RunCallbacks callbacks;
    if (!outputs.quiet) {
      callbacks.on_phase = [&](const std::string& phase) {
        if (phase == "training") print_step_heading(out);
        if (phase == "reference") out << "training the single-device reference...\n";
        out.flush();
      };
      callbacks.on_step = [&](const StepRecord& r) {
        print_step(r, out);
        out.flush();
      };
      print_run_header(config, out);
      if (backend_choice != config.backend) out << "  backend: " << backend_choice << "\n";
      callbacks.on_resume = [&](const CheckpointInfo& from,
                                const std::vector<std::string>& skipped) {
        for (const auto& why : skipped) out << "  " << why << "\n";
        out << "  resuming from " << from.directory << " (step " << from.step << ", world "
            << from.world << ", " << from.strategy << ")\n";
      };
    }
    install_stop_signal_handlers(/*escalate=*/true);
    summary = run_training(config, callbacks);
    if (!summary.device_tracing.empty() && !outputs.quiet)
      out << "device tracing: " << summary.device_tracing << "\n";
  } catch (const ConfigError& e) {
    err << "error: " << RunFlags::describe_key(e.field()) << ": "
        << std::string(e.what()).substr(e.field().size() + 2) << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return kExitRunFailed;
  }

  Conclusion how;
  how.steps = config.steps;
  how.tolerance = outputs.tolerance;
  how.resume_command = resume_command(outputs.command, config.checkpoint_dir);
  return write_outputs_and_conclude(outputs.files, summary, how, outputs.quiet, out, err);
}

}  // namespace shardscope::cli
