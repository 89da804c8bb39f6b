#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>

#include "engine/state/training_state.h"
#include "engine/train/config.h"
#include "strategies/sharded/host_offload.h"

namespace shardscope {

class Comm;

// ZeRO stage 1 over any list of replicated parameters and any group: parameters are partitioned
// across the group's ranks balanced by size; each rank keeps optimizer state for, and steps,
// only its own partition, then every parameter is broadcast from its owner. With offload the
// owned state and its step live on the host (ZeRO-Offload).
class ShardedOptimizerState {
 public:
  ShardedOptimizerState(std::vector<torch::Tensor> params, Comm& comm,
                        const OptimizerConfig& config, bool offload);

  void step(double lr);
  // Binds parameter i's regions (`entries`, each with its region, value and whether this rank
  // may write it): only the owner writes them, with its optimizer state.
  void bind(StateBinding& binding, size_t i, std::vector<StateBinding::Entry> entries) const;
  int64_t owned_bytes() const { return owned_bytes_; }
  int64_t host_bytes() const { return offloaded_ ? offloaded_->host_bytes() : 0; }

 private:
  void broadcast_from_owners();

  std::vector<torch::Tensor> params_;
  Comm& comm_;
  std::vector<int> owner_;
  int64_t owned_bytes_ = 0;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<HostOffloadedOptimizer> offloaded_;
};

}  // namespace shardscope
