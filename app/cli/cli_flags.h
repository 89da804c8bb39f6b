#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace CLI {
class App;
}

namespace shardscope::cli {

// One `run` flag and the configuration key it sets; the same keys are used in config files, so
// flags and files are validated by one table.
struct FlagSpec {
  std::string flag;                                                         // "--d-model"
  std::string key;                                                          // "model.d_model"
  enum class Kind { Int, Uint, Double, String, Bool, BoolOff, List } kind;  // BoolOff: sets false
  std::string help;
};

const std::vector<FlagSpec>& run_flag_specs();

// Holds raw flag text until parsing is over, then turns the given ones into config overrides.
class RunFlags {
 public:
  // `defaults`: a command's own defaults over a fresh Config's, for the help (bench's world 4).
  void add_to(CLI::App& app);
  void add_to(CLI::App& app, const nlohmann::json& defaults);
  // Throws ConfigError naming the config key when a value does not parse.
  nlohmann::json overrides() const;
  // The keys of `config_file` (if not empty; JSON with comments), then the given flags on top.
  nlohmann::json config_overrides(const std::string& config_file) const;
  // The config keys of the flags given on the command line ("world", "model.frozen").
  std::vector<std::string> given_keys() const;
  // "--heads (model.heads)" for a config key that has a flag, else the key itself.
  static std::string describe_key(const std::string& key);

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> bools_;
  std::map<std::string, const void*> given_;  // flag -> CLI option, to ask whether it was set
};

}  // namespace shardscope::cli
