// `ep`: expert parallelism for a mixture-of-experts model (Megatron-Core, DeepSpeed-MoE,
// torchtitan). The world is d groups of e adjacent ranks; in each group rank j holds experts
// [j E/e, (j+1) E/e) of every layer, and every rank trains on its own micro-batch, as in data
// parallelism. Everything but the experts is replicated and averaged over the world with
// ddp_bucketed's buckets. A token's chosen experts may live elsewhere: each MoE layer sends every
// token to its experts' ranks and the outputs back with two all_to_alls (strategies/
// expert_dispatch.h). An expert's gradient so gathers the contributions of its group's e ranks
// through the all_to_all's backward; summing that over the d copies of the expert (one
// all-reduce over the ranks holding it) and dividing by the world gives the single device's
// gradient.
#include "strategies/expert/expert_parallel.h"

#include <map>

#include <c10/util/accumulate.h>
#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/model/mixed_precision.h"
#include "engine/state/training_state.h"
#include "engine/state/weights.h"
#include "engine/train/config.h"
#include "engine/train/optimizer_factory.h"
#include "engine/train/strategy_registry.h"
#include "strategies/common/named_group.h"
#include "strategies/common/option_support.h"
#include "strategies/data_parallel/bucket_plan.h"
#include "strategies/data_parallel/gradient_buckets.h"
#include "strategies/data_parallel/hooked_data_parallel.h"
#include "strategies/expert/expert_dispatch.h"
#include "strategies/sharded/flat_shard.h"

namespace shardscope {

int expert_parallel_degree(const Config& config) {
  const int e = config.strategy_options.expert_parallel;
  return e > 0 ? e : config.world;
}

namespace {

// The expert a parameter belongs to ("blocks.3.moe.experts.5.fc.weight" -> 5), or -1.
int expert_of(const std::string& name) {
  static const std::string kMarker = ".moe.experts.";
  const auto at = name.find(kMarker);
  if (at == std::string::npos) return -1;
  return std::stoi(name.substr(at + kMarker.size()));
}

class ExpertParallel final : public HookedDataParallel {
 public:
  bool replicated() const override { return false; }

  MemoryBytes memory() const override {
    MemoryBytes bytes = ReplicatedStrategy::memory();
    bytes.comm_buffers += dense_->buffer_bytes() + (experts_ ? experts_->buffer_bytes() : 0);
    return bytes;
  }

  // The global norm: the replicated weights' gradients are the same on every rank (counted
  // here once), and each expert's lives on one rank of each expert-parallel group (the group
  // sums their squares), as clip_sharded_gradients does for any slices over a group.
  double clip_gradients(double max_norm) override {
    if (placement_.comm == nullptr) return ReplicatedStrategy::clip_gradients(max_norm);
    std::vector<torch::Tensor> experts, dense;
    for (size_t i = 0; i < trainable_.size(); ++i)
      (expert_slot_[i] >= 0 ? experts : dense).push_back(trainable_[i]);
    return clip_sharded_gradients(*placement_.comm, experts, max_norm, dense, {});
  }

  // Each expert from the rank of the first group that holds it.
  NamedTensors full_weights() override {
    torch::NoGradGuard no_grad;
    NamedTensors out = to_cpu_copy(model_->named_params());
    if (placement_.comm == nullptr) return out;
    std::map<std::string, size_t> position;
    for (size_t i = 0; i < out.size(); ++i) position[out[i].first] = i;
    std::map<std::string, std::vector<int64_t>> shape(released_.begin(), released_.end());
    const auto options = model_->tok_emb->weight.options();
    for (int owner = 0; owner < placement_.ranks; ++owner) {
      std::vector<std::string> names;
      int64_t elements = 0;
      for (const auto& [name, p] : out) {
        const int expert = expert_of(name);
        if (expert < 0 || placement_.owner(expert) != owner) continue;
        names.push_back(name);
        elements += owner == placement_.rank ? p.numel() : c10::multiply_integers(shape[name]);
      }
      torch::Tensor flat;
      if (owner == placement_.rank) {
        std::vector<torch::Tensor> own;
        for (const auto& name : names) own.push_back(out[position[name]].second);
        flat = at::flatten_dense_tensors(own).to(options.device());
      } else {
        flat = torch::empty({elements}, options);
      }
      placement_.comm->broadcast(flat, owner);
      if (owner == placement_.rank) continue;
      const auto host = flat.to(torch::kCPU);
      int64_t at = 0;
      for (const auto& name : names) {
        const auto& dims = shape[name];
        const int64_t n = c10::multiply_integers(dims);
        out[position[name]].second = host.narrow(0, at, n).view(dims).clone();
        at += n;
      }
    }
    return out;
  }

  // Replicated weights are written by rank 0, experts by the first group's ranks that hold them.
  void bind_state(StateBinding& binding) override {
    size_t next = 0;
    for (const auto& [name, p] : model_->named_params()) {
      if (!holds_parameter(name)) continue;
      const bool written = expert_of(name) >= 0 ? ctx_->rank < placement_.ranks : ctx_->rank == 0;
      const bool trainable = next < trainable_.size() && trainable_[next].is_same(p);
      if (trainable) {
        binding.add_whole(name, p, written, optimizer_.get(), p);
      } else {
        binding.add_whole(name, p, written);
      }
      next += trainable;
    }
  }

 protected:
  void configure(const Config& config) override {
    const int e = expert_parallel_degree(config);
    placement_.ranks = e;
    placement_.experts = config.model.experts;
  }

  bool holds_parameter(const std::string& name) const override {
    const int expert = expert_of(name);
    return expert < 0 || placement_.owner(expert) == ctx_->rank % placement_.ranks;
  }
  bool replicated_parameter(const std::string& name) const override { return expert_of(name) < 0; }

  void prepare() override {
    const Config& config = *ctx_->config;
    const int e = placement_.ranks, world = ctx_->world, rank = ctx_->rank;
    placement_.rank = rank % e;
    const int first = rank - placement_.rank;
    if (e > 1) {
      std::vector<int> group;
      for (int r = first; r < first + e; ++r) group.push_back(r);
      placement_.comm = &named_group(*ctx_, "ep", group);
    }
    Comm* copies = nullptr;  // the ranks holding this rank's experts
    if (world / e > 1) {
      std::vector<int> holders;
      for (int r = placement_.rank; r < world; r += e) holders.push_back(r);
      copies = &named_group(*ctx_, "expert_dp", holders);
    }
    std::vector<torch::Tensor> dense, experts;
    for (size_t i = 0; i < trainable_.size(); ++i) {
      const bool expert = expert_of(trainable_names_[i]) >= 0;
      expert_slot_.push_back(expert ? static_cast<int64_t>(experts.size()) : -1);
      dense_slot_.push_back(expert ? -1 : static_cast<int64_t>(dense.size()));
      (expert ? experts : dense).push_back(trainable_[i]);
    }
    const auto& options = config.strategy_options;
    const auto dtype = gradient_reduce_dtype(options);
    dense_ = std::make_unique<GradientBuckets>(
        dense, *ctx_->comm, bucket_cap_bytes(options.bucket_mb, gradient_bytes(dense)), dtype,
        options.overlap);
    if (copies != nullptr && !experts.empty()) {
      experts_ = std::make_unique<GradientBuckets>(
          experts, *copies, bucket_cap_bytes(options.bucket_mb, gradient_bytes(experts)), dtype,
          options.overlap);
    }
    const int per_rank = placement_.per_rank();
    for (size_t b = 0; b < model_->blocks->size(); ++b) {
      auto& moe = model_->blocks[b]->as<Block>()->moe;
      std::vector<Mlp> local;
      for (int l = 0; l < per_rank; ++l)
        local.emplace_back(moe->experts->ptr<MlpImpl>(placement_.rank * per_rank + l));
      moe->experts_fn = [this, local](const torch::Tensor& tokens, const torch::Tensor& chosen,
                                      const torch::Tensor& weights) {
        return ep::dispatch_to_experts(tokens, chosen, weights, local, placement_);
      };
    }
  }

  void gradient_ready(size_t i) override {
    if (expert_slot_[i] < 0) {
      dense_->ready(dense_slot_[i]);
    } else if (experts_) {
      experts_->ready(expert_slot_[i]);
    }
  }

  void finish_sync(const std::vector<bool>& used) override {
    std::vector<bool> dense_ready, dense_used, expert_ready, expert_used;
    for (size_t i = 0; i < trainable_.size(); ++i) {
      const bool expert = expert_slot_[i] >= 0;
      (expert ? expert_ready : dense_ready).push_back(ready_[i]);
      (expert ? expert_used : dense_used).push_back(used[i]);
    }
    dense_->finish(dense_ready, dense_used);
    if (experts_) experts_->finish(expert_ready, expert_used);  // the mean over the copies
    // An expert's gradient sums its group's e ranks' contributions (the mean over the copies
    // keeps that): divided by e it is the mean over the world, as the single device's.
    for (size_t i = 0; i < trainable_.size(); ++i) {
      if (expert_slot_[i] < 0 || !trainable_[i].grad().defined()) continue;
      trainable_[i].mutable_grad().div_(placement_.ranks);
    }
  }

 private:
  ep::Placement placement_;
  std::vector<int64_t> dense_slot_, expert_slot_;  // per trainable parameter (-1: the other)
  std::unique_ptr<GradientBuckets> dense_, experts_;
};

// What ep reads: its degree, and the bucketed sync of its dense weights and expert copies.
OptionSupport expert_parallel_options() {
  OptionSupport support;
  support.reduce_dtype = true;
  support.activation_checkpointing = true;  // a recomputed block dispatches again, in order
  support.expert_parallel = true;
  support.buckets = true;
  support.overlap = true;
  support.find_unused_parameters = true;
  support.blocks_in_backward = "its all_to_all inside each expert layer's backward";
  return support;
}

void validate_expert_parallel(const Config& config) {
  const int e = expert_parallel_degree(config);
  const std::string field = "strategy_options.expert_parallel";
  if (config.model.experts == 0) {
    throw ConfigError("model.experts",
                      "ep spreads a mixture's experts over ranks: give the model experts "
                      "(--experts E --top-k k)");
  }
  if (config.world % e != 0) {
    throw ConfigError(field, "ep " + std::to_string(e) + " does not divide world " +
                                 std::to_string(config.world) +
                                 " (the world is groups of ep ranks holding all experts)");
  }
  if (config.model.experts % e != 0) {
    throw ConfigError(field, "ep " + std::to_string(e) + " does not divide the " +
                                 std::to_string(config.model.experts) +
                                 " experts (each rank holds E/ep of them)");
  }
  ReplicatedStrategy::validate_unused_parameters(config);
  validate_option_support(config, expert_parallel_options());
}

StrategyTraits traits() {
  StrategyTraits t;
  t.family = StrategyFamily::kExpertParallel;
  t.options = expert_parallel_options();
  t.teaching =
      "Expert parallelism: each rank holds E/ep of a mixture's experts and trains on its own "
      "batch. Each MoE layer sends every token to its chosen experts' ranks and the outputs back "
      "with two all_to_alls (dispatch and combine); the rest is averaged as in DDP. Uneven "
      "routing shows as ranks waiting in the all_to_all.";
  return t;
}

const StrategyRegistrar registrar({
    "ep",
    "expert parallel: a mixture's experts spread over --ep ranks (default all), tokens sent to "
    "them and back with all_to_all; the rest data-parallel (needs --experts)",
    [] { return std::unique_ptr<Strategy>(std::make_unique<ExpertParallel>()); },
    validate_expert_parallel,
    traits(),
});

}  // namespace
}  // namespace shardscope
