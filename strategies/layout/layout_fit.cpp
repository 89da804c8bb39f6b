#include "strategies/layout/layout_fit.h"

#include <algorithm>

#include "strategies/layout/parallel_layout.h"

namespace shardscope {

std::optional<Config> fit_layout_to_model(const Config& config, std::string* how) {
  Config as_given = config;
  try {
    finalize(as_given);
    return std::nullopt;  // nothing to fit
  } catch (const ConfigError& e) {
    // Only a pipeline longer than the model is this function's to mend.
    if (e.field() != "strategy_options.pipeline_parallel") return std::nullopt;
  }
  for (int p = std::min(config.world, config.model.layers); p >= 2; --p) {
    if (config.world % p != 0) continue;
    Config candidate = config;
    candidate.strategy_options.pipeline_parallel = p;
    candidate.strategy_options.data_parallel = 0;  // the rest of the world
    try {
      finalize(candidate);
      if (how != nullptr) *how = layout_of(candidate).describe();
      return candidate;
    } catch (const ConfigError&) {
    }
  }
  return std::nullopt;
}

}  // namespace shardscope
