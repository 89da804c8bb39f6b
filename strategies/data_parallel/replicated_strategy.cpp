#include "strategies/data_parallel/replicated_strategy.h"

#include <algorithm>

#include <torch/nn/utils/clip_grad.h>
#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/launch/backward_thread.h"
#include "engine/model/mixed_precision.h"
#include "engine/state/initial_weights.h"
#include "engine/state/training_state.h"
#include "engine/state/weights.h"
#include "engine/train/config.h"
#include "engine/train/optimizer_factory.h"
#include "profiling/record/memory_tags.h"
#include "strategies/sharded/flat_shard.h"

namespace shardscope {

void ReplicatedStrategy::setup(RankContext& ctx) {
  ctx_ = &ctx;
  model_ = initial_model(*ctx.config);
  for (const auto& [name, p] : model_->named_params()) {
    if (holds_parameter(name)) continue;
    // Released before the model moves to its device, so the device never holds it.
    released_.emplace_back(name, p.sizes().vec());
    torch::NoGradGuard no_grad;
    p.set_data(torch::empty({0}, p.options()));
  }
  model_->to(ctx.device);
  model_->activation_checkpointing = ctx.config->strategy_options.activation_checkpointing;
  for (const auto& [name, p] : model_->named_params()) {
    if (!p.requires_grad() || !holds_parameter(name)) continue;
    trainable_.push_back(p);
    trainable_names_.push_back(name);
  }
  if (shard_optimizer_) {
    sharded_ = std::make_unique<ShardedOptimizerState>(trainable_, *ctx.comm, ctx.config->optimizer,
                                                       ctx.config->strategy_options.offload);
  } else {
    optimizer_ = make_optimizer(ctx.config->optimizer, trainable_);
  }
}

torch::Tensor ReplicatedStrategy::forward(const Batch& batch) {
  ComputePrecisionScope precision(ctx_->config->strategy_options, ctx_->device.type());
  return model_->loss(batch);
}

torch::Tensor ReplicatedStrategy::forward_backward(const Batch& batch, bool, double loss_scale) {
  auto loss = forward(batch);
  // One micro-batch a step needs no scaling: an operator and an autograd node fewer to dispatch.
  const torch::Tensor scaled = loss_scale == 1.0 ? loss : loss * loss_scale;
  run_backward_pass([&] { scaled.backward(); });
  tag_gradients();
  return loss.detach();
}

double ReplicatedStrategy::clip_gradients(double max_norm) {
  // After synchronisation every rank holds the full averaged gradient: the local norm is global.
  return torch::nn::utils::clip_grad_norm_(trainable_, max_norm);
}

void ReplicatedStrategy::optimizer_step(double lr) {
  if (optimizer_) {
    set_learning_rate(*optimizer_, lr);
    optimizer_->step();
  }
  if (sharded_) sharded_->step(lr);
}

void ReplicatedStrategy::zero_grad() {
  // Every gradient, not only those the (possibly sharded) optimizer updates.
  for (auto& p : trainable_) p.mutable_grad() = torch::Tensor();
}

void ReplicatedStrategy::bind_state(StateBinding& binding) {
  // Every rank holds every weight; rank 0 writes them, or each one's owner under ZeRO-1 (which
  // alone has its optimizer state).
  const bool first = ctx_->rank == 0;
  size_t next = 0;
  for (const auto& [name, p] : model_->named_params()) {
    const bool trainable = next < trainable_.size() && trainable_[next].is_same(p);
    if (!trainable) {
      binding.add_whole(name, p, first);
    } else if (sharded_) {
      StateBinding::Entry entry;
      entry.region = whole_region(name, p);
      entry.value = p;
      entry.written = true;
      sharded_->bind(binding, next, {entry});
    } else {
      binding.add_whole(name, p, first, optimizer_.get(), p);
    }
    next += trainable;
  }
}

NamedTensors ReplicatedStrategy::full_weights() {
  return to_cpu_copy(model_->named_params());
}

void ReplicatedStrategy::broadcast_parameters(int root) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params;
  for (const auto& [name, p] : model_->named_params())
    if (holds_parameter(name) && replicated_parameter(name)) params.push_back(p);
  auto flat = at::flatten_dense_tensors(params);
  ctx_->comm->broadcast(flat, root);
  {
    auto pieces = at::unflatten_dense_tensors(flat, params);
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(pieces[i]);
  }
  // The finished broadcast may still be held (by the backend, then by Comm until a later wait
  // sweeps it) and with it this whole-model buffer, into the first step's backward: release
  // the storage now.
  flat.set_();
}

std::vector<bool> ReplicatedStrategy::used_on_any_rank(const std::vector<bool>& used_here) {
  return true_on_any_rank(*ctx_->comm, used_here);
}

void ReplicatedStrategy::validate_unused_parameters(const Config& config) {
  if (config.model.unused_parameter && !config.strategy_options.find_unused_parameters) {
    throw ConfigError("strategy_options.find_unused_parameters",
                      "the model has a parameter that gets no gradient; " + config.strategy +
                          " needs find_unused_parameters (--find-unused-parameters) to reduce "
                          "without it");
  }
}

void ReplicatedStrategy::tag_gradients() const {
  for (const auto& p : trainable_)
    profiling::tag_memory(p.grad(), profiling::MemoryKind::kGradients);
}

int64_t ReplicatedStrategy::trainable_bytes() const {
  int64_t bytes = 0;
  for (const auto& p : trainable_) bytes += p.numel() * p.element_size();
  return bytes;
}

MemoryBytes ReplicatedStrategy::memory() const {
  MemoryBytes bytes;
  const int64_t trainable = trainable_bytes();
  for (const auto& p : model_->parameters()) bytes.parameters += p.numel() * p.element_size();
  bytes.gradients = trainable;
  if (sharded_ && sharded_->host_bytes() > 0) {
    bytes.host = sharded_->host_bytes();
  } else {
    const int64_t stepped = sharded_ ? sharded_->owned_bytes() : trainable;
    bytes.optimizer_state =
        static_cast<int64_t>(stepped * optimizer_state_ratio(ctx_->config->optimizer));
  }
  return bytes;
}

}  // namespace shardscope
