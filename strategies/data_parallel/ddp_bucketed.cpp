// `ddp_bucketed`: gradients packed into flat buckets of `bucket_mb`, filled in reverse
// registration order (roughly the order backward produces them). With overlap on, a bucket's
// all-reduce starts as soon as its last gradient is in, so communication runs under the rest of
// backward; with overlap off everything is reduced after backward, which is what the timeline
// contrasts.
#include "engine/train/config.h"
#include "engine/train/strategy_registry.h"
#include "strategies/common/option_support.h"
#include "strategies/data_parallel/bucketed_data_parallel.h"

namespace shardscope {
namespace {

class DdpBucketed final : public BucketedDataParallel {};

StrategyTraits traits() {
  StrategyTraits t;
  t.data_parallel_sync = true;
  t.options.reduce_dtype = true;
  t.options.buckets = true;
  t.options.overlap = true;
  t.gradient_sync.overlaps_backward = true;
  t.options.find_unused_parameters = true;
  t.teaching =
      "Gradients are grouped into buckets, each all_reduced while backward goes on. With "
      "overlap on, the orange collectives sit under the blue backward spans and the red "
      "exposed-communication line shrinks; turn overlap off to see it grow.";
  return t;
}

const StrategyRegistrar registrar({
    "ddp_bucketed",
    "gradients in buckets of bucket_mb, each all-reduced as soon as it is full (overlap option)",
    [] { return std::unique_ptr<Strategy>(std::make_unique<DdpBucketed>()); },
    [](const Config& config) {
      ReplicatedStrategy::validate_unused_parameters(config);
      validate_option_support(config, traits().options);
    },
    traits(),
});

}  // namespace
}  // namespace shardscope
