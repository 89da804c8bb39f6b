#include "strategies/sharded/host_offload.h"

#include <torch/torch.h>

#include "engine/train/optimizer_factory.h"

namespace shardscope {

HostOffloadedOptimizer::HostOffloadedOptimizer(const OptimizerConfig& config,
                                               std::vector<torch::Tensor> targets)
    : targets_(std::move(targets)), state_ratio_(optimizer_state_ratio(config)) {
  torch::NoGradGuard no_grad;
  for (const auto& t : targets_) {
    masters_.push_back(t.detach()
                           .to(torch::kCPU, torch::kFloat, /*non_blocking=*/false, /*copy=*/true)
                           .set_requires_grad(true));
  }
  optimizer_ = make_optimizer(config, masters_);
}

void HostOffloadedOptimizer::step(double lr) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < targets_.size(); ++i) {
    const auto& grad = targets_[i].grad();
    masters_[i].mutable_grad() = grad.defined()
                                     ? grad.to(torch::kCPU, torch::kFloat, false, /*copy=*/true)
                                     : torch::Tensor();
  }
  set_learning_rate(*optimizer_, lr);
  optimizer_->step();
  for (size_t i = 0; i < targets_.size(); ++i) {
    if (masters_[i].grad().defined()) targets_[i].variable_data().copy_(masters_[i]);
    masters_[i].mutable_grad() = torch::Tensor();
  }
}

int64_t HostOffloadedOptimizer::host_bytes() const {
  int64_t bytes = 0;
  for (const auto& m : masters_) bytes += m.numel() * m.element_size();
  return static_cast<int64_t>(bytes * (1.0 + state_ratio_));
}

}  // namespace shardscope
