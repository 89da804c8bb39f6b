#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/optim/optimizer.h>

#include "engine/train/strategy.h"
#include "strategies/sharded/sharded_optimizer.h"

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
  void bind_state(StateBinding& binding) override;
  std::vector<int64_t> take_routed_tokens() override { return model_->take_routed_tokens(); }

  // ZeRO stage 1, composable with any replicated gradient sync: call before setup. Parameters are
  // partitioned across ranks balanced by size; each rank keeps optimizer state for, and steps,
  // only its own partition, then every parameter is broadcast from its owner.
  void shard_optimizer_state() { shard_optimizer_ = true; }

 protected:
  // Whether this rank holds parameter `name` (all of them, unless a subclass spreads some over
  // ranks: expert parallelism). A parameter not held is released at setup (its tensor left
  // empty, its shape in released_) and is neither trained nor counted here.
  virtual bool holds_parameter(const std::string& /*name*/) const { return true; }
  // Whether every rank holds the same copy of `name` (so rank 0's copy can be broadcast).
  virtual bool replicated_parameter(const std::string& /*name*/) const { return true; }
  // What DDP does at construction: every rank starts from the root's weights (ours agree already,
  // since initialisation depends on the seed only; this keeps it true for any model).
  void broadcast_parameters(int root);
  // The loss of one micro-batch, computed in the configured precision (a strategy that splits
  // the batch's sequences computes its part of it).
  virtual torch::Tensor forward(const Batch& batch);
  int64_t trainable_bytes() const;
  // Tells the memory tracker that each trainable parameter's .grad is a gradient.
  void tag_gradients() const;
  // Which trainable parameters got a gradient on at least one rank this step (a blocking
  // all-reduce of a bitmap, as DDP does with find_unused_parameters). A parameter no rank used
  // keeps an undefined gradient, so the optimizer skips it exactly as on a single device.
  std::vector<bool> used_on_any_rank(const std::vector<bool>& used_here);

 public:
  // For data-parallel strategies: a model with a parameter that never gets a gradient needs
  // find_unused_parameters, or every step would wait for a gradient that never comes.
  static void validate_unused_parameters(const Config& config);
  // Gradient bucket cap in bytes from strategy_options.bucket_mb (0: DDP's default, 25 MiB).

  RankContext* ctx_ = nullptr;
  GptModel model_{nullptr};
  std::vector<torch::Tensor> trainable_;  // parameters that require gradients, in order
  std::vector<std::string> trainable_names_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;                  // null when sharded
  std::vector<std::pair<std::string, std::vector<int64_t>>> released_;  // name, full shape

 private:
  bool shard_optimizer_ = false;
  std::unique_ptr<ShardedOptimizerState> sharded_;
};

}  // namespace shardscope
