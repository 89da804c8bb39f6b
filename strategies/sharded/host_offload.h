#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "engine/train/config.h"

namespace shardscope {

// ZeRO-Offload's optimizer: an fp32 master copy of the given tensors and all optimizer state
// live in host memory; a step brings the gradients to the host, steps there, and writes the new
// values back into the (device) tensors. On a CPU run the copies are same-memory copies, and the
// result is the same as stepping in place.
class HostOffloadedOptimizer {
 public:
  HostOffloadedOptimizer(const OptimizerConfig& config, std::vector<torch::Tensor> targets);

  // Uses each target's .grad (a target without one is skipped, as an optimizer does).
  void step(double lr);
  int64_t host_bytes() const;  // master copy plus optimizer state
  // For checkpoints: the optimizer over the master copies, and target i's master copy.
  torch::optim::Optimizer& optimizer() const { return *optimizer_; }
  const torch::Tensor& master(size_t i) const { return masters_[i]; }

 private:
  std::vector<torch::Tensor> targets_;
  std::vector<torch::Tensor> masters_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  double state_ratio_ = 0;
};

}  // namespace shardscope
