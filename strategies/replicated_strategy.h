#pragma once

#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "engine/strategy.h"

namespace shardscope {

// Shared part of strategies in which every rank holds the whole model and its optimizer:
// they differ only in how gradients are synchronised.
class ReplicatedStrategy : public Strategy {
 public:
  void setup(RankContext& ctx) override;
  torch::Tensor forward_backward(const Batch& batch, bool last_micro, double loss_scale) override;
  double clip_gradients(double max_norm) override;
  void optimizer_step(double lr) override;
  void zero_grad() override;
  NamedTensors full_weights() override;
  bool replicated() const override { return true; }
  MemoryBytes memory() const override;

 protected:
  RankContext* ctx_ = nullptr;
  GptModel model_{nullptr};
  std::vector<torch::Tensor> trainable_;  // parameters that require gradients, in order
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace shardscope
