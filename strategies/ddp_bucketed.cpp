// `ddp_bucketed`: gradients packed into flat buckets of `bucket_mb`, filled in reverse
// registration order (roughly the order backward produces them). With overlap on, a bucket's
// all-reduce starts as soon as its last gradient is in, so communication runs under the rest of
// backward; with overlap off everything is reduced after backward, which is what the timeline
// contrasts.
#include <algorithm>

#include <torch/torch.h>

#include "engine/comm.h"
#include "engine/config.h"
#include "engine/mixed_precision.h"
#include "engine/strategy_registry.h"
#include "strategies/bucket_plan.h"
#include "strategies/hooked_data_parallel.h"
#include "strategies/option_support.h"

namespace shardscope {
namespace {

class DdpBucketed final : public HookedDataParallel {
 public:
  MemoryBytes memory() const override {
    MemoryBytes bytes = ReplicatedStrategy::memory();
    for (const auto& bucket : buckets_) bytes.comm_buffers += bucket.buffer.nbytes();
    return bytes;
  }

 protected:
  void prepare() override {
    const auto& options = ctx_->config->strategy_options;
    overlap_ = options.overlap;
    build_buckets(bucket_cap_bytes(*ctx_->config));
  }

  void gradient_ready(size_t i) override {
    Bucket& bucket = fill(i);
    if (--bucket.pending == 0 && overlap_) launch(bucket);
  }

  void finish_sync(const std::vector<bool>& used) override {
    for (size_t i = 0; i < trainable_.size(); ++i) {
      if (!ready_[i]) --fill(i).pending;  // zeros from this rank
    }
    for (auto& bucket : buckets_) {
      if (!bucket.launched) launch(bucket);  // overlap off, or held back by an unused parameter
    }
    for (auto& bucket : buckets_) {
      bucket.work.wait();
      for (size_t k = 0; k < bucket.params.size(); ++k) {
        torch::Tensor& param = trainable_[bucket.params[k]];
        if (!used[bucket.params[k]]) {
          param.mutable_grad() = torch::Tensor();
          continue;
        }
        param.mutable_grad().copy_(
            bucket.buffer.narrow(0, bucket.offsets[k], param.numel()).view_as(param));
      }
      bucket.launched = false;
      bucket.pending = bucket.params.size();
    }
  }

 private:
  struct Bucket {
    std::vector<size_t> params;    // indices into trainable_
    std::vector<int64_t> offsets;  // element offset of each in `buffer`
    torch::Tensor buffer;
    size_t pending = 0;
    bool launched = false;
    CommWork work;
  };

  void build_buckets(int64_t cap_bytes) {
    bucket_of_.assign(trainable_.size(), 0);
    for (auto& members : plan_buckets(trainable_, cap_bytes)) {
      Bucket bucket;
      int64_t elements = 0;
      for (size_t i : members) {
        bucket.offsets.push_back(elements);
        bucket_of_[i] = buckets_.size();
        elements += trainable_[i].numel();
      }
      bucket.params = std::move(members);
      bucket.buffer =
          torch::zeros({elements}, trainable_[bucket.params.front()].options().dtype(
                                       gradient_reduce_dtype(ctx_->config->strategy_options)));
      bucket.pending = bucket.params.size();
      buckets_.push_back(std::move(bucket));
    }
  }

  // Copies parameter i's gradient (zeros if it has none) into its slot of its bucket.
  Bucket& fill(size_t i) {
    torch::NoGradGuard no_grad;
    Bucket& bucket = buckets_[bucket_of_[i]];
    const auto k = static_cast<size_t>(std::find(bucket.params.begin(), bucket.params.end(), i) -
                                       bucket.params.begin());
    torch::Tensor& param = trainable_[i];
    torch::Tensor& grad = param.mutable_grad();
    if (!grad.defined()) grad = torch::zeros_like(param);
    bucket.buffer.narrow(0, bucket.offsets[k], param.numel()).copy_(grad.reshape({-1}));
    return bucket;
  }

  void launch(Bucket& bucket) {
    bucket.buffer.div_(ctx_->world);
    bucket.work = ctx_->comm->all_reduce_async(bucket.buffer);
    bucket.launched = true;
  }

  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  bool overlap_ = true;
};

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
});

}  // namespace
}  // namespace shardscope
