// `fsdp` (ZeRO-3): nothing is replicated. The model is cut into units (the embeddings, each
// transformer block, the final norm and LM head; with tied embeddings the head shares the
// embedding's unit), each a flat vector sharded across ranks. A unit is all-gathered just before
// its forward and freed after it, all-gathered again when backward reaches it, and once its
// gradients are complete they are reduce-scattered, so each rank keeps only its slice of
// parameters, gradients and optimizer state. With prefetch on, the next unit's all-gather is
// issued while the current unit computes.
#include <algorithm>
#include <deque>
#include <functional>

#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/launch/backward_thread.h"
#include "engine/model/mixed_precision.h"
#include "engine/state/initial_weights.h"
#include "engine/state/training_state.h"
#include "engine/state/weights.h"
#include "engine/train/config.h"
#include "engine/train/optimizer_factory.h"
#include "engine/train/strategy_registry.h"
#include "profiling/record/memory_tags.h"
#include "strategies/common/option_support.h"
#include "strategies/data_parallel/gradient_ready_hooks.h"
#include "strategies/data_parallel/replicated_strategy.h"
#include "strategies/sharded/flat_shard.h"

namespace shardscope {
namespace {

// A unit's gathered parameters live in one flat tensor whose storage is released while the unit
// is sharded. The storage object itself stays, so tensors autograd saved in forward see the
// values again once backward re-gathers into the same storage (what FSDP does in Python).
void free_storage(const torch::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, t.device()));
  storage->set_nbytes(0);
}

void allocate_storage(const torch::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  const size_t bytes = t.numel() * t.element_size();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

class Fsdp final : public Strategy {
 public:
  void setup(RankContext& ctx) override {
    ctx_ = &ctx;
    const Config& config = *ctx.config;
    prefetch_ = config.strategy_options.prefetch;
    reduce_dtype_ = gradient_reduce_dtype(config.strategy_options);
    model_ = initial_model(config);  // full weights first: the units shard them
    model_->to(ctx.device);
    model_->activation_checkpointing = config.strategy_options.activation_checkpointing;
    build_units();
    std::vector<torch::Tensor> trainable;
    for (auto& unit : units_) {
      for (size_t k = 0; k < unit.layout->params().size(); ++k) {
        const torch::Tensor& p = unit.layout->params()[k];
        if (!p.requires_grad()) continue;
        param_unit_.push_back(&unit - units_.data());
        trainable.push_back(p);
      }
      for (const auto& piece : unit.layout->pieces()) {
        if (!unit.layout->params()[piece.param].requires_grad()) continue;
        slices_.push_back(
            unit.shard.narrow(0, piece.shard_offset, piece.length).set_requires_grad(true));
        slice_unit_.push_back(&unit - units_.data());
        slice_param_.push_back(unit.first_trainable + trainable_index(unit, piece.param));
        slice_offset_.push_back(piece.shard_offset);
      }
    }
    if (!slices_.empty()) optimizer_ = make_optimizer(config.optimizer, slices_);
    got_grad_.assign(trainable.size(), false);
    hooks_.attach(trainable, [this](size_t i) { gradient_ready(i); });
  }

  torch::Tensor forward_backward(const Batch& batch, bool, double loss_scale) override {
    for (auto& unit : units_) {
      unit.pending = unit.trainable;
      unit.reduced_this_pass = false;
    }
    forward_order_.clear();
    torch::Tensor loss;
    {
      ComputePrecisionScope precision(ctx_->config->strategy_options, ctx_->device.type());
      auto x = run_unit(embed_unit_, [&] { return model_->embed(batch.inputs); });
      for (size_t i = 0; i < model_->blocks->size(); ++i)
        x = run_unit(i + 1, [&] { return model_->block(i, x); });
      auto logits = run_unit(head_unit_, [&] { return model_->head(x); });
      loss = GptModelImpl::loss_of(logits, batch.targets);
    }
    const torch::Tensor scaled = loss * loss_scale;
    run_backward_pass([&] { scaled.backward(); });
    finish_backward();
    return loss.detach();
  }

  void sync_gradients() override {
    std::vector<bool> used(got_grad_.size(), true);
    if (ctx_->config->strategy_options.find_unused_parameters)
      used = true_on_any_rank(*ctx_->comm, got_grad_);
    for (size_t s = 0; s < slices_.size(); ++s) {
      const Unit& unit = units_[slice_unit_[s]];
      slices_[s].mutable_grad() =
          used[slice_param_[s]] && unit.grad_slice.defined()
              ? unit.grad_slice.narrow(0, slice_offset_[s], slices_[s].numel())
              : torch::Tensor();
    }
    got_grad_.assign(got_grad_.size(), false);
  }

  double clip_gradients(double max_norm) override {
    return clip_sharded_gradients(*ctx_->comm, slices_, max_norm);
  }

  void optimizer_step(double lr) override {
    if (!optimizer_) return;
    set_learning_rate(*optimizer_, lr);
    optimizer_->step();  // updates the slices in place, inside each unit's shard
  }

  void zero_grad() override {
    for (auto& slice : slices_) slice.mutable_grad() = torch::Tensor();
    for (auto& unit : units_) unit.grad_slice = torch::Tensor();
  }

  NamedTensors full_weights() override {
    // A check after training, not part of it: keep it out of the memory peaks.
    const int64_t peak = peak_gathered_bytes_;
    for (auto& unit : units_) ensure_gathered(unit);
    NamedTensors weights = to_cpu_copy(model_->named_params());
    for (auto& unit : units_) release(unit);
    peak_gathered_bytes_ = peak;
    return weights;
  }

  bool replicated() const override { return false; }

  void bind_state(StateBinding& binding) override {
    // A rank holds only its slice of each unit; it loads and writes exactly that.
    size_t s = 0;
    for (const auto& unit : units_) {
      for (const auto& piece : unit.layout->pieces()) {
        StateBinding::Entry entry;
        entry.region = {unit.names[piece.param], -1, piece.param_offset, piece.length};
        entry.value = unit.shard.narrow(0, piece.shard_offset, piece.length);
        entry.written = true;
        if (unit.layout->params()[piece.param].requires_grad()) {
          entry.optimizer = optimizer_.get();
          entry.key = slices_[s++];
        }
        binding.add(std::move(entry));
      }
    }
  }

  MemoryBytes memory() const override {
    MemoryBytes bytes;
    int64_t owned = 0;
    for (const auto& unit : units_) {
      bytes.parameters += unit.shard.nbytes();
      bytes.gradients += unit.layout->shard_numel() * unit.shard.element_size();
    }
    for (const auto& slice : slices_) owned += slice.nbytes();
    bytes.parameters += peak_gathered_bytes_;  // units gathered at once
    bytes.optimizer_state =
        static_cast<int64_t>(owned * optimizer_state_ratio(ctx_->config->optimizer));
    bytes.comm_buffers = peak_reduce_bytes_;
    return bytes;
  }

 private:
  struct Unit {
    std::string name;
    std::unique_ptr<FlatShard> layout;
    std::vector<std::string> names;  // of layout->params()
    torch::Tensor full;              // gathered flat parameters; storage released while sharded
    torch::Tensor shard;             // this rank's slice, the only copy it keeps
    torch::Tensor grad_slice;        // this rank's slice of the gradient summed over micro-batches
    size_t trainable = 0;            // parameters that get gradients
    size_t first_trainable = 0;
    size_t pending = 0;  // gradients still to come in this backward
    bool gathered = false;
    bool gathering = false;
    CommWork gather_work;
    bool reducing = false;           // its reduce-scatter is in flight
    bool reduced_this_pass = false;  // launched in this forward-backward
    torch::Tensor reduce_input, reduced;
    CommWork reduce_work;
  };

  static size_t trainable_index(const Unit& unit, size_t param) {
    size_t index = 0;
    for (size_t k = 0; k < param; ++k) index += unit.layout->params()[k].requires_grad();
    return index;
  }

  void build_units() {
    const ModelConfig& m = ctx_->config->model;
    std::vector<std::vector<torch::Tensor>> members(m.layers + 2);
    std::vector<std::vector<std::string>> member_names(m.layers + 2);
    std::vector<std::string> names(m.layers + 2);
    embed_unit_ = 0;
    head_unit_ = m.tie_embeddings ? 0 : static_cast<size_t>(m.layers) + 1;
    names[0] = m.tie_embeddings ? "embeddings+head" : "embeddings";
    for (int i = 0; i < m.layers; ++i) names[i + 1] = "blocks." + std::to_string(i);
    names[m.layers + 1] = "head";
    for (const auto& [name, param] : model_->named_params()) {
      size_t unit = head_unit_;
      if (starts_with(name, "tok_emb.") || starts_with(name, "pos_emb.")) {
        unit = embed_unit_;
      } else if (starts_with(name, "blocks.")) {
        unit = std::stoul(name.substr(7)) + 1;
      }
      members[unit].push_back(param);
      member_names[unit].push_back(name);
    }
    if (m.tie_embeddings) members.pop_back();
    size_t first_trainable = 0;
    torch::NoGradGuard no_grad;
    for (size_t u = 0; u < members.size(); ++u) {
      Unit unit;
      unit.name = names[u];
      unit.names = member_names[u];
      unit.layout = std::make_unique<FlatShard>(members[u], ctx_->rank, ctx_->world);
      unit.full = torch::zeros({unit.layout->padded_numel()}, members[u].front().options());
      for (size_t k = 0; k < members[u].size(); ++k) {
        auto& p = members[u][k];
        auto slot = unit.full.narrow(0, unit.layout->offset(k), p.numel());
        slot.copy_(p.reshape({-1}));
        p.set_data(slot.view(p.sizes()));  // the parameter now lives inside the flat vector
        unit.trainable += p.requires_grad();
      }
      unit.shard =
          unit.full.narrow(0, unit.layout->shard_begin(), unit.layout->shard_numel()).clone();
      unit.first_trainable = first_trainable;
      first_trainable += unit.trainable;
      free_storage(unit.full);
      units_.push_back(std::move(unit));
    }
  }

  // The unit forward runs at `position`: the embeddings, each block, the head; past the head,
  // none (units_.size()).
  size_t unit_at(size_t position) const {
    const size_t blocks = model_->blocks->size();
    if (position == 0) return embed_unit_;
    if (position <= blocks) return position;
    return position == blocks + 1 ? head_unit_ : units_.size();
  }

  torch::Tensor run_unit(size_t u, const std::function<torch::Tensor()>& compute) {
    ensure_gathered(units_[u]);
    const size_t position = forward_order_.size();
    forward_order_.push_back(u);
    // The unit forward runs next, by position: with tied embeddings the head computes with the
    // embeddings' unit, so unit numbers alone would prefetch neither block 0 nor the head.
    const size_t next = unit_at(position + 1);
    if (prefetch_ && next < units_.size()) start_gather(units_[next]);
    torch::Tensor out = compute();
    release(units_[u]);
    if (out.requires_grad()) {
      out.register_hook([this, position](const torch::Tensor&) { before_backward(position); });
    }
    return out;
  }

  // Backward is about to run the unit that ran at `position` in forward.
  void before_backward(size_t position) {
    ensure_gathered(units_[forward_order_[position]]);
    if (prefetch_ && position > 0) start_gather(units_[forward_order_[position - 1]]);
  }

  void gradient_ready(size_t i) {
    got_grad_[i] = true;
    Unit& unit = units_[param_unit_[i]];
    if (--unit.pending == 0) {
      reduce(unit);
      release(unit);
    }
  }

  void finish_backward() {
    for (auto& unit : units_) {
      if (unit.trainable > 0 && !unit.reduced_this_pass) reduce(unit);  // a gradient never came
      release(unit);
    }
    while (!in_flight_.empty()) complete_oldest_reduction();
  }

  // Waits for the oldest reduce-scatter and adds its result to the unit's gradient slice.
  void complete_oldest_reduction() {
    torch::NoGradGuard no_grad;
    Unit& unit = units_[in_flight_.front()];
    in_flight_.pop_front();
    unit.reduce_work.wait();
    unit.reduce_work = CommWork();  // it holds the backend's copy of the unit's gradients
    auto reduced = unit.reduced.to(unit.shard.scalar_type());
    if (unit.grad_slice.defined()) {
      unit.grad_slice.add_(reduced);
    } else {
      unit.grad_slice = reduced;
      profiling::tag_memory(unit.grad_slice, profiling::MemoryKind::kGradients);
    }
    unit.reduced = torch::Tensor();
    unit.reducing = false;
  }

  void start_gather(Unit& unit) {
    if (unit.gathered || unit.gathering) return;
    {
      profiling::MemoryTag tag(profiling::MemoryKind::kCommBuffers);  // a gathered unit
      allocate_storage(unit.full);
    }
    live_gathered_bytes_ += unit.full.nbytes();
    peak_gathered_bytes_ = std::max(peak_gathered_bytes_, live_gathered_bytes_);
    unit.gather_work = ctx_->comm->all_gather_into_async(unit.full, unit.shard);
    unit.gathering = true;
  }

  void ensure_gathered(Unit& unit) {
    start_gather(unit);
    if (!unit.gathering) return;
    unit.gather_work.wait();
    unit.gather_work = CommWork();
    unit.gathering = false;
    unit.gathered = true;
  }

  void release(Unit& unit) {
    if (!unit.gathered) return;
    free_storage(unit.full);
    live_gathered_bytes_ -= unit.full.nbytes();
    unit.gathered = false;
  }

  // Sends this rank's gradients of the unit (zeros where it has none) to their owners, averaged,
  // and drops the full gradients.
  void reduce(Unit& unit) {
    torch::NoGradGuard no_grad;
    profiling::MemoryTag tag(profiling::MemoryKind::kCommBuffers);
    unit.reduce_input =
        torch::empty({unit.layout->padded_numel()}, unit.shard.options().dtype(reduce_dtype_));
    unit.layout->gather_gradients(unit.reduce_input);
    for (const auto& p : unit.layout->params()) p.mutable_grad() = torch::Tensor();
    unit.reduce_input.div_(ctx_->world);
    unit.reduced = torch::empty({unit.layout->shard_numel()}, unit.reduce_input.options());
    unit.reduce_work = ctx_->comm->reduce_scatter_tensor_async(unit.reduced, unit.reduce_input);
    unit.reducing = true;
    unit.reduced_this_pass = true;
    live_reduce_bytes_ += unit.reduce_input.nbytes();
    peak_reduce_bytes_ = std::max(peak_reduce_bytes_, live_reduce_bytes_);
    // The collective keeps what it still reads (Gloo reduces a copy it took at launch; NCCL's
    // work holds its input until done): the unit's full gradients are not needed any more.
    live_reduce_bytes_ -= unit.reduce_input.nbytes();
    unit.reduce_input = torch::Tensor();
    // Two in flight keep the link busy; more would only hold more full-size gradient buffers.
    in_flight_.push_back(&unit - units_.data());
    while (in_flight_.size() > 2) complete_oldest_reduction();
  }

  RankContext* ctx_ = nullptr;
  GptModel model_{nullptr};
  std::vector<Unit> units_;
  size_t embed_unit_ = 0, head_unit_ = 0;
  std::vector<size_t> forward_order_;  // units in the order forward ran them (tied: 0 twice)
  std::vector<size_t> param_unit_;     // unit of each trainable parameter (hook order)
  std::vector<torch::Tensor> slices_;  // optimizer parameters: views into the units' shards
  std::vector<size_t> slice_unit_, slice_param_;
  std::vector<int64_t> slice_offset_;
  std::vector<bool> got_grad_;  // per trainable parameter, this step, on this rank
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  GradientReadyHooks hooks_;
  std::deque<size_t> in_flight_;  // units whose reduce-scatter is not yet completed, oldest first
  bool prefetch_ = true;
  c10::ScalarType reduce_dtype_ = c10::kFloat;
  int64_t live_gathered_bytes_ = 0, peak_gathered_bytes_ = 0;
  int64_t live_reduce_bytes_ = 0, peak_reduce_bytes_ = 0;
};

StrategyTraits traits() {
  StrategyTraits t;
  t.zero_stage = 3;
  t.options.reduce_dtype = true;
  t.options.prefetch = true;
  t.options.find_unused_parameters = true;
  t.options.blocks_in_backward = "its pre-backward all-gather";
  t.teaching =
      "FSDP (ZeRO-3): parameters are sharded as well and all_gathered unit by unit before "
      "forward and backward; memory bars shrink by about N, communication grows by half.";
  return t;
}

const StrategyRegistrar registrar({
    "fsdp",
    "ZeRO-3 / FSDP: parameters, gradients and optimizer state sharded per unit; all-gather per "
    "unit in forward and backward, reduce-scatter of gradients (prefetch option)",
    [] { return std::unique_ptr<Strategy>(std::make_unique<Fsdp>()); },
    [](const Config& config) {
      ReplicatedStrategy::validate_unused_parameters(config);
      validate_option_support(config, traits().options);
    },
    traits(),
});

}  // namespace
}  // namespace shardscope
