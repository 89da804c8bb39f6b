#pragma once

#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "engine/train/config.h"

namespace shardscope {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerConfig& config,
                                                        std::vector<torch::Tensor> params);

// Learning rate at `step` (0-based) of `total_steps`: linear warm-up, then the schedule.
double learning_rate(const OptimizerConfig& config, int step, int total_steps);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

// Bytes of optimizer state the optimizer keeps per byte of parameters it updates.
double optimizer_state_ratio(const OptimizerConfig& config);

}  // namespace shardscope
