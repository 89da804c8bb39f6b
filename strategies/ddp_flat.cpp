// `ddp_flat`: the simplest correct data parallelism. Each parameter's gradient is all-reduced on
// its own, launched asynchronously the moment autograd has finished accumulating it, and waited
// for before the optimizer step. Accumulation micro-batches do not communicate: the hook only
// fires on the last one, when .grad holds the sum over all micro-batches.
#include <torch/torch.h>

#include "engine/comm.h"
#include "engine/strategy_registry.h"
#include "strategies/gradient_ready_hooks.h"
#include "strategies/replicated_strategy.h"

namespace shardscope {
namespace {

class DdpFlat final : public ReplicatedStrategy {
 public:
  void setup(RankContext& ctx) override {
    ReplicatedStrategy::setup(ctx);
    broadcast_parameters(/*root=*/0);
    works_.resize(trainable_.size());
    launched_.assign(trainable_.size(), false);
    hooks_.attach(trainable_, [this](size_t i) {
      if (syncing_) launch(i);
    });
  }

  torch::Tensor forward_backward(const Batch& batch, bool last_micro, double loss_scale) override {
    syncing_ = last_micro;
    return ReplicatedStrategy::forward_backward(batch, last_micro, loss_scale);
  }

  void sync_gradients() override {
    // A parameter the forward did not use never fired its hook. With find_unused_parameters,
    // the ranks agree which ones some rank did use; those are reduced (zeros from the ranks that
    // did not), the rest keep no gradient at all.
    std::vector<bool> used(trainable_.size(), true);
    if (ctx_->config->strategy_options.find_unused_parameters) used = used_on_any_rank(launched_);
    for (size_t i = 0; i < trainable_.size(); ++i) {
      if (!launched_[i] && used[i]) launch(i);
    }
    for (size_t i = 0; i < trainable_.size(); ++i) {
      if (launched_[i]) works_[i].wait();
    }
    launched_.assign(trainable_.size(), false);
    syncing_ = false;
  }

 private:
  void launch(size_t i) {
    torch::NoGradGuard no_grad;
    torch::Tensor& grad = trainable_[i].mutable_grad();
    if (!grad.defined()) grad = torch::zeros_like(trainable_[i]);
    grad.div_(ctx_->world);
    works_[i] = ctx_->comm->all_reduce_async(grad);
    launched_[i] = true;
  }

  GradientReadyHooks hooks_;
  std::vector<CommWork> works_;
  std::vector<bool> launched_;
  bool syncing_ = false;
};

const StrategyRegistrar registrar({
    "ddp_flat",
    "one async all-reduce per parameter, launched as its gradient is ready",
    [] { return std::unique_ptr<Strategy>(std::make_unique<DdpFlat>()); },
    &ReplicatedStrategy::validate_unused_parameters,
});

}  // namespace
}  // namespace shardscope
