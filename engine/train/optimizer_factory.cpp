#include "engine/train/optimizer_factory.h"

#include <algorithm>
#include <cmath>

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace shardscope {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& c,
                                                        std::vector<torch::Tensor> params) {
  if (c.name == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        std::move(params),
        torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay));
  }
  return std::make_unique<torch::optim::AdamW>(std::move(params),
                                               torch::optim::AdamWOptions(c.lr)
                                                   .betas({c.beta1, c.beta2})
                                                   .eps(c.eps)
                                                   .weight_decay(c.weight_decay));
}

double learning_rate(const OptimizerConfig& c, int step, int total_steps) {
  if (step < c.warmup_steps) return c.lr * (step + 1) / static_cast<double>(c.warmup_steps);
  if (c.schedule == "constant") return c.lr;
  const int decay_steps = std::max(1, total_steps - c.warmup_steps - 1);
  const double progress = std::min(1.0, (step - c.warmup_steps) / static_cast<double>(decay_steps));
  const double floor = c.lr * c.min_lr_ratio;
  const double shape =
      c.schedule == "cosine" ? 0.5 * (1.0 + std::cos(M_PI * progress)) : 1.0 - progress;
  return floor + (c.lr - floor) * shape;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

double optimizer_state_ratio(const OptimizerConfig& c) {
  if (c.name == "sgd") return c.momentum > 0 ? 1.0 : 0.0;
  return 2.0;  // Adam moments m and v
}

}  // namespace shardscope
