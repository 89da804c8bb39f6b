#include "app/cli/collect_command.h"
#include "app/cli/run_outputs.h"
#include "profiling/io/input_file.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "app/cli/exit_code.h"
#include "app/cli/run_summary_text.h"
#include "engine/model/gpt_model.h"
#include "engine/state/atomic_file.h"
#include "engine/state/weights.h"
#include "engine/state/weights_file.h"
#include "engine/train/config.h"
#include "engine/train/config_json.h"
#include "engine/train/run.h"
#include "profiling/io/trace_io.h"

namespace shardscope::cli {
namespace {

// A folder that is not a finished run's: what is wrong, naming the file.
class BadFolder : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `noun`: what the file is ("rank's outcome file"); `who_writes`: said when it is missing.
nlohmann::json read_json(const std::string& path, const std::string& noun,
                         const std::string& who_writes) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
    throw BadFolder(path + ": missing (" + who_writes + ")");
  // A FIFO would block the read forever, a folder would throw from inside the stream: refused by
  // what they are first.
  if (const std::string why =
          profiling::input_file_problem(path, profiling::kMaxTextInputBytes, noun);
      !why.empty())
    throw BadFolder(why);
  std::ifstream file(path);
  if (!file) throw BadFolder(path + ": cannot be read (" + noun + ")");
  // Nesting no file of a run has (a 300 KB config.json of 150,000 nested arrays once overflowed
  // the stack): refused while parsing.
  constexpr int kDeepest = kDeepestRunJson;
  struct TooDeep {};
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(
        file,
        [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
          if (depth > kDeepest) throw TooDeep{};
          return true;
        },
        /*allow_exceptions=*/false);
  } catch (const TooDeep&) {
    throw BadFolder(path + ": nests deeper than " + std::to_string(kDeepest) + " levels (" + noun +
                    ")");
  }
  if (json.is_discarded() || !json.is_object())
    throw BadFolder(path + ": not a JSON object (" + noun + ")");
  return json;
}

// The run's config as rank 0 kept it (its world resolved from WORLD_SIZE).
Config folder_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  const nlohmann::json json = read_json(
      path, "run's config file", "rank 0 of `shardscope worker --out " + dir + "` writes it");
  try {
    Config config = config_from_json(json);
    finalize(config);
    return config;
  } catch (const ConfigError& e) {
    throw BadFolder(path + ": " + e.what());
  }
}

// The parameters of rank 0's weights against the config's model.
void check_model_of(const std::string& dir, const Config& config, const std::string& base) {
  int64_t held = 0;
  for (const auto& [name, tensor] : read_weights_file(base + ".weights")) held += tensor.numel();
  const int64_t expected = parameter_count(config.model);
  if (held != expected) {
    throw BadFolder(base + ".weights holds " + std::to_string(held) + " parameters, the model of " +
                    dir + "/config.json has " + std::to_string(expected) +
                    ": the config is not this run's");
  }
}

// Every rank left its whole outcome: a rank still running, or one that died, left none or an
// unfinished snapshot, and a summary of it would say less than the run did.
void check_rank_files(const std::string& dir, const Config& config) {
  const int world = config.world;
  for (int r = 0; r < world; ++r) {
    const std::string base = dir + "/rank-" + std::to_string(r);
    const nlohmann::json json =
        read_json(base + ".json", "rank's outcome file",
                  "rank " + std::to_string(r) + " of world " + std::to_string(world) +
                      " writes it when it ends; is it still running, or did it never start?");
    if (!json.contains("rank") || json["rank"] != r || !json.contains("events"))
      throw BadFolder(base + ".json: not rank " + std::to_string(r) + "'s outcome");
    if (json.contains("partial")) {
      throw BadFolder(base + ".json: unfinished (a " + json["partial"].get<std::string>() +
                      " taken while the rank ran): the rank is still running, or died before "
                      "it could write its outcome");
    }
    // The config beside the ranks is theirs: one of another run (five steps where they ran two)
    // had `collect --reference` train five and call the ranks wrong.
    const nlohmann::json& result = json.value("result", nlohmann::json::object());
    if (result.is_object() && result.contains("steps") && result["steps"].is_array() &&
        result.value("stopped_by_signal", 0) == 0) {
      const int ran = result.value("first_step", 0) + static_cast<int>(result["steps"].size());
      if (ran != config.steps) {
        throw BadFolder(base + ".json: the rank trained to step " + std::to_string(ran) + ", " +
                        dir + "/config.json says " + std::to_string(config.steps) +
                        " steps: the config is not this run's");
      }
    }
    if (json.contains("result") && !std::filesystem::exists(base + ".weights"))
      throw BadFolder(base + ".weights: missing (rank " + std::to_string(r) + "'s weights)");
    if (json.contains("result")) {
      // The tail only: the weights themselves are read once, when the run is summarised.
      if (const std::string why = profiling::input_file_problem(
              base + ".weights", profiling::kMaxWeightsBytes, "rank's weights");
          !why.empty())
        throw BadFolder(why + " (rank " + std::to_string(r) + "'s weights)");
      if (const std::string why = weights_file_problem(base + ".weights"); !why.empty())
        throw BadFolder(why + " (rank " + std::to_string(r) + "'s weights)");
      // A replica holds the whole model: the config's model must be that one (a config of
      // d_model 128 beside ranks of 64 was summarised as the 128-wide model, exit 0).
      if (r == 0 && result.value("replicated", false)) check_model_of(dir, config, base);
    }
  }
}

}  // namespace

int collect_command(const CollectOptions& options, std::ostream& out, std::ostream& err) {
  const std::string& dir = options.dir;
  Config config;
  try {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      throw BadFolder(dir +
                      (std::filesystem::exists(dir, ec) ? ": not a folder" : ": no such folder") +
                      " (the workers' --out)");
    }
    config = folder_config(dir);
    check_rank_files(dir, config);
    config.reference = options.reference;
    if (config.reference) check_environment(config);  // it trains here, on the run's device
  } catch (const BadFolder& e) {
    err << "error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const ConfigError& e) {
    err << "error: " << dir << "/config.json: " << e.what() << "\n";
    return kExitBadInput;
  }
  if (std::isnan(options.tolerance)) {
    err << "error: --tolerance: must be a finite number\n";
    return kExitBadInput;
  }
  const double tolerance = options.tolerance >= 0 ? options.tolerance : default_tolerance(config);
  const OutputFiles& outputs = options.outputs;
  std::vector<OutputClaim> claims;  // held until the outputs are written
  try {
    // The folder's files are the inputs: no output may write over one (a summary over
    // config.json, a trace directory over the rank files).
    std::vector<InputFile> inputs;
    inputs.push_back({"folder", dir + "/config.json"});
    for (int r = 0; r < config.world; ++r) {
      for (const char* ext : {".json", ".weights"})
        inputs.push_back({"folder", dir + "/rank-" + std::to_string(r) + ext});
    }
    claims = check_output_files(outputs, inputs);
  } catch (const ConfigError& e) {
    err << "error: " << e.what() << "\n";
    return kExitBadInput;
  }

  RunSummary summary;
  try {
    RunCallbacks callbacks;
    if (!options.quiet) {
      print_run_header(config, out);
      callbacks.on_phase = [&](const std::string& phase) {
        if (phase == "training") print_step_heading(out);
        if (phase == "reference") out << "training the single-device reference...\n";
        out.flush();
      };
      callbacks.on_step = [&](const StepRecord& step) { print_step(step, out); };
    }
    summary = summarise_rank_folder(config, dir, callbacks);
  } catch (const ConfigError& e) {
    err << "error: " << dir << "/config.json: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    err << "error: " << dir << ": " << e.what() << "\n";
    return kExitRunFailed;
  }
  Conclusion how;
  how.steps = config.steps;
  how.tolerance = tolerance;
  how.no_reference = "not checked (--reference trains it here)";
  return write_outputs_and_conclude(outputs, summary, how, options.quiet, out, err);
}

}  // namespace shardscope::cli
