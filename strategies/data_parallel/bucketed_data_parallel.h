#pragma once

#include <memory>
#include <vector>

#include "strategies/data_parallel/gradient_buckets.h"
#include "strategies/data_parallel/hooked_data_parallel.h"

namespace shardscope {

// Hand-made bucketed DDP over the world: gradients packed into flat buckets of `bucket_mb`,
// filled in reverse registration order (roughly the order backward produces them). With overlap
// on, a bucket's all-reduce starts as soon as its last gradient is in; with overlap off
// everything is reduced after backward. `ddp_bucketed` is this; `cp` averages its gradients
// with it.
class BucketedDataParallel : public HookedDataParallel {
 public:
  MemoryBytes memory() const override;

 protected:
  void prepare() override;
  void gradient_ready(size_t i) override { buckets_->ready(i); }
  void finish_sync(const std::vector<bool>& used) override { buckets_->finish(ready_, used); }

 private:
  std::unique_ptr<GradientBuckets> buckets_;
};

}  // namespace shardscope
