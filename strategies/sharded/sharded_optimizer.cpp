#include "strategies/sharded/sharded_optimizer.h"

#include <algorithm>

#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/train/optimizer_factory.h"
#include "profiling/record/memory_tags.h"

namespace shardscope {

ShardedOptimizerState::ShardedOptimizerState(std::vector<torch::Tensor> params, Comm& comm,
                                             const OptimizerConfig& config, bool offload)
    : params_(std::move(params)), comm_(comm), owner_(params_.size(), 0) {
  // Largest first onto the least-loaded rank: every rank computes the same partition, and no
  // rank ends up with the embedding plus more than its share (the seed's round-robin did).
  std::vector<size_t> order(params_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params_[a].numel() > params_[b].numel(); });
  std::vector<int64_t> load(comm.size(), 0);
  for (size_t i : order) {
    const int rank = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner_[i] = rank;
    load[rank] += params_[i].numel() * params_[i].element_size();
  }
  std::vector<torch::Tensor> mine;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (owner_[i] == comm.rank()) mine.push_back(params_[i]);
  }
  owned_bytes_ = load[comm.rank()];
  if (mine.empty()) return;
  if (offload) {
    offloaded_ = std::make_unique<HostOffloadedOptimizer>(config, mine);
  } else {
    optimizer_ = make_optimizer(config, mine);
  }
}

void ShardedOptimizerState::bind(StateBinding& binding, size_t i,
                                 std::vector<StateBinding::Entry> entries) const {
  const bool mine = owner_[i] == comm_.rank();
  size_t k = 0;  // its position among the parameters this rank owns
  for (size_t j = 0; j < i; ++j) k += owner_[j] == comm_.rank();
  for (auto& entry : entries) {
    entry.written = entry.written && mine;
    if (mine && offloaded_) {
      entry.optimizer = &offloaded_->optimizer();
      entry.key = offloaded_->master(k);
      entry.mirror = offloaded_->master(k);
    } else if (mine) {
      entry.optimizer = optimizer_.get();
      entry.key = params_[i];
    }
    binding.add(std::move(entry));
  }
}

void ShardedOptimizerState::step(double lr) {
  if (optimizer_) {
    set_learning_rate(*optimizer_, lr);
    optimizer_->step();
  }
  if (offloaded_) offloaded_->step(lr);
  broadcast_from_owners();
}

void ShardedOptimizerState::broadcast_from_owners() {
  torch::NoGradGuard no_grad;
  for (int owner = 0; owner < comm_.size(); ++owner) {
    std::vector<torch::Tensor> owned;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (owner_[i] == owner) owned.push_back(params_[i]);
    }
    if (owned.empty()) continue;
    profiling::MemoryTag tag(profiling::MemoryKind::kCommBuffers);
    auto flat = at::flatten_dense_tensors(owned);
    comm_.broadcast(flat, owner);
    if (owner != comm_.rank()) {
      auto pieces = at::unflatten_dense_tensors(flat, owned);
      for (size_t k = 0; k < owned.size(); ++k) owned[k].copy_(pieces[k]);
    }
    // The finished broadcast may be held until a later wait sweeps it, and with it this buffer
    // into the next step's backward: release the storage now.
    flat.set_();
  }
}

}  // namespace shardscope
