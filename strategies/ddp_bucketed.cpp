// `ddp_bucketed`: gradients packed into flat buckets of `bucket_mb`, filled in reverse
// registration order (roughly the order backward produces them). With overlap on, a bucket's
// all-reduce starts as soon as its last gradient is in, so communication runs under the rest of
// backward; with overlap off everything is reduced after backward, which is what the timeline
// contrasts.
#include <torch/torch.h>

#include "engine/comm.h"
#include "engine/config.h"
#include "engine/mixed_precision.h"
#include "engine/strategy_registry.h"
#include "strategies/bucket_plan.h"
#include "strategies/gradient_buckets.h"
#include "strategies/hooked_data_parallel.h"
#include "strategies/option_support.h"

namespace shardscope {
namespace {

class DdpBucketed final : public HookedDataParallel {
 public:
  MemoryBytes memory() const override {
    MemoryBytes bytes = ReplicatedStrategy::memory();
    bytes.comm_buffers += buckets_->buffer_bytes();
    return bytes;
  }

 protected:
  void prepare() override {
    const auto& options = ctx_->config->strategy_options;
    buckets_ = std::make_unique<GradientBuckets>(
        trainable_, *ctx_->comm,
        bucket_cap_bytes(ctx_->config->strategy_options.bucket_mb, gradient_bytes(trainable_)),
        gradient_reduce_dtype(options), options.overlap);
  }

  void gradient_ready(size_t i) override { buckets_->ready(i); }

  void finish_sync(const std::vector<bool>& used) override { buckets_->finish(ready_, used); }

 private:
  std::unique_ptr<GradientBuckets> buckets_;
};

StrategyTraits traits() {
  StrategyTraits t;
  t.data_parallel_sync = true;
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
      OptionSupport support;
      support.reduce_dtype = true;
      validate_option_support(config, support);
    },
    traits(),
});

}  // namespace
}  // namespace shardscope
