// `single`: one rank, no communication. The baseline every other strategy is measured against,
// and the engine of the single-device reference.
#include "engine/train/strategy_registry.h"
#include "strategies/common/option_support.h"
#include "strategies/data_parallel/replicated_strategy.h"

namespace shardscope {
namespace {

class SingleDevice final : public ReplicatedStrategy {};

StrategyTraits traits() {
  StrategyTraits t;
  t.family = StrategyFamily::kReference;
  // Only recomputation: one device has nothing to synchronize.
  t.teaching = "One device trains on the whole batch: the reference every strategy must match.";
  return t;
}

const StrategyRegistrar registrar({
    "single",
    "one rank, no communication (the reference)",
    [] { return std::unique_ptr<Strategy>(std::make_unique<SingleDevice>()); },
    [](const Config& config) {
      if (config.world != 1) {
        throw ConfigError("world", "strategy 'single' runs on exactly one rank, got world " +
                                       std::to_string(config.world));
      }
      validate_option_support(config, traits().options);
    },
    traits(),
});

}  // namespace
}  // namespace shardscope
