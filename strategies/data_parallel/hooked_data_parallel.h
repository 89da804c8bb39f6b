#pragma once

#include <cstddef>
#include <vector>

#include "strategies/data_parallel/gradient_ready_hooks.h"
#include "strategies/data_parallel/replicated_strategy.h"

namespace shardscope {

struct Config;

// The shape every hand-made DDP shares: rank 0's weights broadcast, a hook per parameter that
// reports its gradient complete, but only on the micro-batch that ends accumulation (the others
// just accumulate into .grad, like DDP's no_sync), and an end of backward that settles the
// parameters no hook reported. Subclasses decide how gradients travel.
class HookedDataParallel : public ReplicatedStrategy {
 public:
  void setup(RankContext& ctx) final;
  torch::Tensor forward_backward(const Batch& batch, bool last_micro, double loss_scale) final;
  void sync_gradients() final;

 protected:
  // Called before the model exists (to choose, say, a sharded optimizer from the configuration).
  virtual void configure(const Config& /*config*/) {}
  // Called once the model exists and before any hook can fire.
  virtual void prepare() {}
  // Parameter i's gradient is complete in .grad (ready_[i] is already set).
  virtual void gradient_ready(size_t i) = 0;
  // After backward: make every parameter with used[i] hold the averaged gradient, including
  // those not ready here (this rank contributes zeros), and leave the others without gradient.
  virtual void finish_sync(const std::vector<bool>& used) = 0;

  std::vector<bool> ready_;  // per trainable parameter, this step

 private:
  GradientReadyHooks hooks_;
  bool syncing_ = false;
};

}  // namespace shardscope
