#include "engine/state/recorded_config.h"

#include <exception>

#include <nlohmann/json.hpp>

namespace shardscope {

std::optional<Config> recorded_config(const profiling::RunRecord& run) {
  if (!run.has_config()) return std::nullopt;
  try {
    return config_from_json(nlohmann::json::parse(run.config_json));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace shardscope
