#include "strategies/data_parallel/bucketed_data_parallel.h"

#include "engine/comm/comm.h"
#include "engine/model/mixed_precision.h"
#include "engine/train/config.h"
#include "strategies/data_parallel/bucket_plan.h"

namespace shardscope {

MemoryBytes BucketedDataParallel::memory() const {
  MemoryBytes bytes = ReplicatedStrategy::memory();
  bytes.comm_buffers += buckets_->buffer_bytes();
  return bytes;
}

void BucketedDataParallel::prepare() {
  const auto& options = ctx_->config->strategy_options;
  buckets_ = std::make_unique<GradientBuckets>(
      trainable_, *ctx_->comm, bucket_cap_bytes(options.bucket_mb, gradient_bytes(trainable_)),
      gradient_reduce_dtype(options), options.overlap);
}

}  // namespace shardscope
