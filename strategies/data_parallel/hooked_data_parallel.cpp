#include "strategies/data_parallel/hooked_data_parallel.h"

#include <torch/torch.h>

namespace shardscope {

void HookedDataParallel::setup(RankContext& ctx) {
  configure(*ctx.config);
  ReplicatedStrategy::setup(ctx);
  broadcast_parameters(/*root=*/0);
  ready_.assign(trainable_.size(), false);
  prepare();
  hooks_.attach(trainable_, [this](size_t i) {
    if (!syncing_) return;
    ready_[i] = true;
    gradient_ready(i);
  });
}

torch::Tensor HookedDataParallel::forward_backward(const Batch& batch, bool last_micro,
                                                   double loss_scale) {
  syncing_ = last_micro;
  return ReplicatedStrategy::forward_backward(batch, last_micro, loss_scale);
}

void HookedDataParallel::sync_gradients() {
  torch::NoGradGuard no_grad;
  // With find_unused_parameters the ranks agree which parameters some rank used; without it
  // every parameter is expected to be used (validation rejects models where it is not).
  std::vector<bool> used(trainable_.size(), true);
  if (ctx_->config->strategy_options.find_unused_parameters) used = used_on_any_rank(ready_);
  finish_sync(used);
  ready_.assign(trainable_.size(), false);
  syncing_ = false;
}

}  // namespace shardscope
