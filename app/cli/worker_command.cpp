#include "app/cli/worker_command.h"

#include <filesystem>
#include <fstream>
#include <ostream>

#include <nlohmann/json.hpp>

#include "app/cli/exit_code.h"
#include "app/cli/run_summary_text.h"
#include "engine/launch/environment.h"
#include "engine/launch/rank_process.h"
#include "engine/launch/stop_request.h"
#include "engine/state/atomic_file.h"
#include "engine/train/config.h"
#include "engine/train/config_json.h"
#include "profiling/io/input_file.h"

namespace shardscope::cli {
namespace {

// Rank 0 keeps the run's config (its world resolved) beside the ranks' outcomes, so that
// `shardscope collect DIR` finds everything in the folder. Our own launcher's config file is
// already there.
void keep_run_config(const std::string& config_file, const std::string& out_dir,
                     const Config& config) {
  const std::string kept = out_dir + "/config.json";
  std::error_code ec;
  if (std::filesystem::equivalent(config_file, kept, ec)) return;
  write_file_atomically(kept, to_json(config).dump(2) + "\n");
}

}  // namespace

// One rank process: its config comes from the launcher's file, who it is from the environment.
// Started by torchrun or a scheduler, it shows what `run` would: rank 0 its steps, every rank
// its own failure (on stderr, stdout being the user's). Under our launcher, which shows both,
// it is silent.
int worker_command(const std::string& config_file, const std::string& out_dir, std::ostream& err) {
  install_stop_signal_handlers(/*escalate=*/false);  // first: the launcher escalates
  std::string who = "worker";
  try {
    const RankEnvironment env = rank_environment_from_env();
    who = "rank " + std::to_string(env.rank);
    check_launch_environment(env.world);
    // A FIFO would block the read forever (SIGTERM only restarts the open), a folder would throw
    // from inside the stream: refused by what they are first.
    if (const std::string why = profiling::input_file_problem(
            config_file, profiling::kMaxTextInputBytes, "config file");
        !why.empty())
      throw ConfigError("config", why);
    std::ifstream file(config_file);
    if (!file) throw ConfigError("config", "cannot read '" + config_file + "'");
    auto json = read_config_json(file, config_file);
    // A config written for any size of job: the launcher's WORLD_SIZE says how many ranks.
    if (json.is_object() && !json.contains("world")) json["world"] = env.world;
    Config config = config_from_json(json);
    finalize(config);
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) throw ConfigError("out", "cannot create '" + out_dir + "': " + ec.message());
    RankProcessReports reports;
    // Only once joined: a stray rank 0 (another job's, or one started after this job ended) must
    // not replace the config the job's own rank 0 kept.
    if (env.rank == 0 && config.world == env.world)
      reports.joined = [&] { keep_run_config(config_file, out_dir, config); };
    if (!env.launcher_reports) {
      if (env.rank == 0) {
        // A worker is a rank process, whatever the config's mode says (`run` reads that).
        Config shown = config;
        shown.mode = "processes";
        print_run_header(shown, err);
        print_step_heading(err);
        reports.on_step = [&](const StepRecord& r) {
          print_step(r, err);
          err.flush();
        };
      }
      reports.failed = [&](const RankFailure& f) {
        // One write for the whole line: ranks sharing a terminal or a log file must not
        // interleave within a line.
        err << (who + " failed: " + f.message + "\n");
        err.flush();
      };
    }
    const int code = run_rank_process(config, env, out_dir, reports);
    if (code == 0 && env.rank == 0 && !env.launcher_reports) {
      err << "rank 0 finished; once every rank has: shardscope collect " << out_dir << "\n";
    }
    return code;
  } catch (const ConfigError& e) {
    err << who << ": error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    err << who << ": failed: " << e.what() << "\n";
    return kExitRunFailed;
  }
}

}  // namespace shardscope::cli
