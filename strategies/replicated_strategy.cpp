#include "strategies/replicated_strategy.h"

#include <torch/nn/utils/clip_grad.h>

#include "engine/optimizer_factory.h"
#include "engine/weights.h"

namespace shardscope {

void ReplicatedStrategy::setup(RankContext& ctx) {
  ctx_ = &ctx;
  model_ = GptModel(ctx.config->model, ctx.config->seed);
  model_->to(ctx.device);
  for (const auto& p : model_->parameters()) {
    if (p.requires_grad()) trainable_.push_back(p);
  }
  optimizer_ = make_optimizer(ctx.config->optimizer, trainable_);
}

torch::Tensor ReplicatedStrategy::forward_backward(const Batch& batch, bool, double loss_scale) {
  auto loss = model_->loss(batch);
  (loss * loss_scale).backward();
  return loss.detach();
}

double ReplicatedStrategy::clip_gradients(double max_norm) {
  // After synchronisation every rank holds the full averaged gradient: the local norm is global.
  return torch::nn::utils::clip_grad_norm_(trainable_, max_norm);
}

void ReplicatedStrategy::optimizer_step(double lr) {
  set_learning_rate(*optimizer_, lr);
  optimizer_->step();
}

void ReplicatedStrategy::zero_grad() {
  optimizer_->zero_grad(/*set_to_none=*/true);
}

NamedTensors ReplicatedStrategy::full_weights() {
  return to_cpu_copy(model_->named_params());
}

MemoryBytes ReplicatedStrategy::memory() const {
  MemoryBytes bytes;
  int64_t trainable = 0;
  for (const auto& p : model_->parameters()) bytes.parameters += p.numel() * p.element_size();
  for (const auto& p : trainable_) trainable += p.numel() * p.element_size();
  bytes.gradients = trainable;
  bytes.optimizer_state =
      static_cast<int64_t>(trainable * optimizer_state_ratio(ctx_->config->optimizer));
  return bytes;
}

}  // namespace shardscope
