// `ddp_flat`: the simplest correct data parallelism. Each parameter's gradient is all-reduced on
// its own, launched asynchronously the moment autograd has finished accumulating it, and waited
// for before the optimizer step. Accumulation micro-batches do not communicate: the hook only
// acts on the last one, when .grad holds the sum over all micro-batches.
#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/train/strategy_registry.h"
#include "profiling/record/memory_tags.h"
#include "strategies/common/option_support.h"
#include "strategies/data_parallel/hooked_data_parallel.h"

namespace shardscope {
namespace {

class DdpFlat final : public HookedDataParallel {
 protected:
  void prepare() override { works_.resize(trainable_.size()); }

  void gradient_ready(size_t i) override { launch(i); }

  void finish_sync(const std::vector<bool>& used) override {
    // Unused here but used elsewhere: contribute zeros, after the others, in one shared order.
    for (size_t i = 0; i < trainable_.size(); ++i) {
      if (!ready_[i] && used[i]) launch(i);
    }
    for (size_t i = 0; i < trainable_.size(); ++i) {
      if (ready_[i] || used[i]) works_[i].wait();
    }
  }

 private:
  void launch(size_t i) {
    torch::NoGradGuard no_grad;
    torch::Tensor& grad = trainable_[i].mutable_grad();
    if (!grad.defined()) {
      grad = torch::zeros_like(trainable_[i]);
      profiling::tag_memory(grad, profiling::MemoryKind::kGradients);
    }
    grad.div_(ctx_->world);
    works_[i] = ctx_->comm->all_reduce_async(grad);
  }

  std::vector<CommWork> works_;
};

StrategyTraits traits() {
  StrategyTraits t;
  t.options.find_unused_parameters = true;
  t.gradient_sync.overlaps_backward = true;
  t.gradient_sync.per_parameter = true;
  t.teaching =
      "One all_reduce per parameter, launched as soon as its gradient is ready: many small "
      "collectives overlap backward but each pays the latency.";
  return t;
}

const StrategyRegistrar registrar({
    "ddp_flat",
    "one async all-reduce per parameter, launched as its gradient is ready",
    [] { return std::unique_ptr<Strategy>(std::make_unique<DdpFlat>()); },
    [](const Config& config) {
      ReplicatedStrategy::validate_unused_parameters(config);
      validate_option_support(config, traits().options);
    },
    traits(),
});

}  // namespace
}  // namespace shardscope
