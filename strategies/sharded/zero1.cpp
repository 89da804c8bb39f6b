// ZeRO stage 1 (sharded optimizer state) as a composition: `X+zero1` is gradient sync X with the
// optimizer state partitioned across ranks; `zero1` alone is `ddp_bucketed+zero1`.
#include <torch/torch.h>

#include "engine/train/config.h"
#include "engine/train/strategy_registry.h"
#include "strategies/data_parallel/replicated_strategy.h"

namespace shardscope {
namespace {

StrategyTraits sharded_optimizer_traits() {
  StrategyTraits t;
  t.zero_stage = 1;
  t.gradient_sync.after_step = GradientSync::AfterStep::kBroadcastFromOwners;
  t.teaching =
      "ZeRO-1: optimizer state is split across ranks (purple bar shrinks by N); gradients are "
      "all-reduced as the sync underneath does, each rank steps the parameters it owns, then "
      "broadcasts them to the others.";
  return t;
}

// The base is looked up when a run starts, not at registration: registration order across files
// is unspecified.
StrategyInfo with_sharded_optimizer(const std::string& name, const std::string& base) {
  StrategyTraits traits = sharded_optimizer_traits();
  // The hybrids' data-parallel dimension shards its optimizer over ddp_bucketed's sync only.
  traits.data_parallel_sync = name == "zero1";
  // The base's options, and offload, which belongs to the sharded optimizer.
  traits.options_base = base;
  traits.options = OptionSupport::none();
  traits.options.offload = true;
  return StrategyInfo{
      name,
      base + " gradient sync, optimizer state sharded across ranks (ZeRO-1)",
      [base] {
        std::unique_ptr<Strategy> strategy = StrategyRegistry::instance().find(base)->make();
        auto* replicated = dynamic_cast<ReplicatedStrategy*>(strategy.get());
        if (replicated == nullptr) throw std::logic_error(base + " cannot shard its optimizer");
        replicated->shard_optimizer_state();
        return strategy;
      },
      [base](const Config& config) {
        // Offload belongs to the sharded optimizer, not to the gradient sync underneath.
        Config base_config = config;
        base_config.strategy_options.offload = false;
        const StrategyInfo* info = StrategyRegistry::instance().find(base);
        if (info->validate) info->validate(base_config);
      },
      traits,
  };
}

const StrategyRegistrar zero1(with_sharded_optimizer("zero1", "ddp_bucketed"));
const StrategyRegistrar torch_ddp_zero1(with_sharded_optimizer("torch_ddp+zero1", "torch_ddp"));
const StrategyRegistrar ddp_flat_zero1(with_sharded_optimizer("ddp_flat+zero1", "ddp_flat"));
const StrategyRegistrar ddp_bucketed_zero1(with_sharded_optimizer("ddp_bucketed+zero1",
                                                                  "ddp_bucketed"));

}  // namespace
}  // namespace shardscope
