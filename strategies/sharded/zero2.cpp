// `zero2` (ZeRO stage 2): gradients and optimizer state partitioned. Gradient buckets are laid
// out flat and reduce-scattered, so each rank receives only its slice of every bucket, the sum
// over ranks; full gradients are dropped as soon as they are in a bucket. Each rank steps its
// slices (views into its own parameters) and the updated slices are all-gathered back. A
// bucket's reduce-scatter starts when its last gradient is ready, overlapping backward.
#include <algorithm>
#include <deque>

#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/model/mixed_precision.h"
#include "engine/state/training_state.h"
#include "engine/train/config.h"
#include "engine/train/optimizer_factory.h"
#include "engine/train/strategy_registry.h"
#include "profiling/record/memory_tags.h"
#include "strategies/common/option_support.h"
#include "strategies/data_parallel/bucket_plan.h"
#include "strategies/data_parallel/hooked_data_parallel.h"
#include "strategies/sharded/flat_shard.h"
#include "strategies/sharded/host_offload.h"

namespace shardscope {
namespace {

class Zero2 final : public HookedDataParallel {
 public:
  double clip_gradients(double max_norm) override {
    return clip_sharded_gradients(*ctx_->comm, slices_, max_norm);
  }

  void optimizer_step(double lr) override {
    torch::NoGradGuard no_grad;
    if (offloaded_) {
      offloaded_->step(lr);
    } else if (optimizer_) {
      set_learning_rate(*optimizer_, lr);
      optimizer_->step();
    }
    // The slices were updated in place inside this rank's parameters; everyone gets everyone's.
    for (auto& bucket : buckets_) {
      auto own = bucket.layout.own_values();
      profiling::MemoryTag tag(profiling::MemoryKind::kCommBuffers);
      auto full = torch::empty({bucket.layout.padded_numel()}, own.options());
      ctx_->comm->all_gather_into(full, own);
      bucket.layout.scatter_values(full);
    }
  }

  void zero_grad() override {
    ReplicatedStrategy::zero_grad();
    for (auto& slice : slices_) slice.mutable_grad() = torch::Tensor();
  }

  void bind_state(StateBinding& binding) override {
    // Every rank holds every weight and loads all of them; what each writes is its own slices,
    // with their optimizer state (the frozen weights: rank 0).
    for (const auto& [name, p] : model_->named_params())
      binding.add_whole(name, p, ctx_->rank == 0 && !p.requires_grad());
    size_t s = 0;
    for (const auto& bucket : buckets_) {
      for (const auto& piece : bucket.layout.pieces()) {
        StateBinding::Entry entry;
        entry.region = {trainable_names_[bucket.params[piece.param]], -1, piece.param_offset,
                        piece.length};
        entry.value = slices_[s];
        entry.written = true;
        if (offloaded_) {
          entry.optimizer = &offloaded_->optimizer();
          entry.key = entry.mirror = offloaded_->master(s);
        } else {
          entry.optimizer = optimizer_.get();
          entry.key = slices_[s];
        }
        binding.add(std::move(entry));
        ++s;
      }
    }
  }

  MemoryBytes memory() const override {
    MemoryBytes bytes;
    for (const auto& p : model_->parameters()) bytes.parameters += p.numel() * p.element_size();
    int64_t owned = 0;
    for (const auto& bucket : buckets_) {
      bytes.gradients += bucket.layout.shard_numel() * bucket.grad_slice.element_size();
      for (const auto& piece : bucket.layout.pieces()) owned += piece.length;
    }
    const int64_t owned_bytes = owned * static_cast<int64_t>(sizeof(float));
    if (offloaded_) {
      bytes.host = offloaded_->host_bytes();
    } else {
      bytes.optimizer_state =
          static_cast<int64_t>(owned_bytes * optimizer_state_ratio(ctx_->config->optimizer));
    }
    bytes.comm_buffers = peak_bucket_bytes_;
    return bytes;
  }

 protected:
  void prepare() override {
    const auto& options = ctx_->config->strategy_options;
    overlap_ = options.overlap;
    reduce_dtype_ = gradient_reduce_dtype(options);
    bucket_of_.assign(trainable_.size(), 0);
    for (auto& members : plan_buckets(
             trainable_, bucket_cap_bytes(options.bucket_mb, gradient_bytes(trainable_)))) {
      std::vector<torch::Tensor> params;
      for (size_t i : members) {
        bucket_of_[i] = buckets_.size();
        params.push_back(trainable_[i]);
      }
      Bucket bucket(FlatShard(params, ctx_->rank, ctx_->world), std::move(members));
      {
        profiling::MemoryTag tag(profiling::MemoryKind::kGradients);
        bucket.grad_slice = torch::zeros({bucket.layout.shard_numel()}, params.front().options());
      }
      bucket.pending = bucket.params.size();
      buckets_.push_back(std::move(bucket));
    }
    // This rank's slices, as views into its own parameters: the optimizer updates them in place.
    for (auto& bucket : buckets_) {
      for (const auto& piece : bucket.layout.pieces()) {
        auto view = bucket.layout.params()[piece.param].variable_data().view({-1}).narrow(
            0, piece.param_offset, piece.length);
        slices_.push_back(view.set_requires_grad(true));
        slice_param_.push_back(bucket.params[piece.param]);
      }
    }
    optimizer_.reset();  // the base made one over whole parameters; this rank steps only slices
    if (options.offload) {
      offloaded_ = std::make_unique<HostOffloadedOptimizer>(ctx_->config->optimizer, slices_);
    } else if (!slices_.empty()) {
      optimizer_ = make_optimizer(ctx_->config->optimizer, slices_);
    }
  }

  void gradient_ready(size_t i) override {
    Bucket& bucket = fill(i);
    if (--bucket.pending == 0 && overlap_) launch(bucket);
  }

  void finish_sync(const std::vector<bool>& used) override {
    for (size_t i = 0; i < trainable_.size(); ++i) {
      if (!ready_[i]) --fill(i).pending;  // zeros, or what earlier micro-batches accumulated
    }
    for (auto& bucket : buckets_) {
      if (!bucket.launched) launch(bucket);
    }
    while (!in_flight_.empty()) complete_oldest();
    for (auto& bucket : buckets_) {
      bucket.launched = false;
      bucket.pending = bucket.params.size();
    }
    size_t s = 0;
    for (auto& bucket : buckets_) {
      for (const auto& piece : bucket.layout.pieces()) {
        // A parameter no rank used keeps no gradient, so the optimizer leaves it alone.
        slices_[s].mutable_grad() =
            used[slice_param_[s]] ? bucket.grad_slice.narrow(0, piece.shard_offset, piece.length)
                                  : torch::Tensor();
        ++s;
      }
    }
  }

 private:
  std::unique_ptr<HostOffloadedOptimizer> offloaded_;  // instead of optimizer_ (ZeRO-Offload)
  struct Bucket {
    Bucket(FlatShard layout_, std::vector<size_t> params_)
        : layout(std::move(layout_)), params(std::move(params_)) {}
    FlatShard layout;
    std::vector<size_t> params;  // indices into trainable_, in layout order
    torch::Tensor buffer;        // the whole bucket while it is filled
    torch::Tensor reduced;       // this rank's slice of the sum, in the reduce dtype
    torch::Tensor grad_slice;    // this rank's slice of the averaged gradient (kept)
    size_t pending = 0;
    bool launched = false;
    CommWork work;
  };

  // Moves parameter i's gradient into its bucket and drops the full gradient.
  Bucket& fill(size_t i) {
    torch::NoGradGuard no_grad;
    Bucket& bucket = buckets_[bucket_of_[i]];
    if (!bucket.buffer.defined()) {
      profiling::MemoryTag tag(profiling::MemoryKind::kCommBuffers);
      bucket.buffer = torch::zeros({bucket.layout.padded_numel()},
                                   trainable_[i].options().dtype(reduce_dtype_));
      live_bucket_bytes_ += bucket.buffer.nbytes();
      peak_bucket_bytes_ = std::max(peak_bucket_bytes_, live_bucket_bytes_);
    }
    const auto k = static_cast<size_t>(std::find(bucket.params.begin(), bucket.params.end(), i) -
                                       bucket.params.begin());
    torch::Tensor& grad = trainable_[i].mutable_grad();
    if (grad.defined()) {
      bucket.buffer.narrow(0, bucket.layout.offset(k), trainable_[i].numel())
          .copy_(grad.reshape({-1}));
    }
    grad = torch::Tensor();
    return bucket;
  }

  void launch(Bucket& bucket) {
    bucket.buffer.div_(ctx_->world);
    profiling::MemoryTag tag(profiling::MemoryKind::kCommBuffers);
    bucket.reduced = torch::empty({bucket.layout.shard_numel()}, bucket.buffer.options());
    bucket.work = ctx_->comm->reduce_scatter_tensor_async(bucket.reduced, bucket.buffer);
    bucket.launched = true;
    // The collective keeps what it still reads (Gloo reduces a copy it took at launch; NCCL's
    // work holds its input until done): this rank's full bucket is not needed any more, and
    // keeping it would hold a second full-size bucket per reduction in flight.
    live_bucket_bytes_ -= bucket.buffer.nbytes();
    bucket.buffer = torch::Tensor();
    // Two in flight keep the link busy; more would only hold more full-size buckets.
    in_flight_.push_back(&bucket - buckets_.data());
    while (in_flight_.size() > 2) complete_oldest();
  }

  // Waits for the oldest reduce-scatter and keeps this rank's slice of it.
  void complete_oldest() {
    Bucket& bucket = buckets_[in_flight_.front()];
    in_flight_.pop_front();
    bucket.work.wait();
    // The finished work holds the backend's copy of the whole bucket: let go of it now, not when
    // the next step's reduction replaces it (that kept every bucket's copy through forward).
    bucket.work = CommWork();
    bucket.grad_slice.copy_(bucket.reduced);
    bucket.reduced = torch::Tensor();
  }

  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::deque<size_t> in_flight_;       // buckets whose reduce-scatter is not yet completed
  std::vector<torch::Tensor> slices_;  // optimizer parameters: views of this rank's slices
  std::vector<size_t> slice_param_;    // trainable index of each slice
  bool overlap_ = true;
  c10::ScalarType reduce_dtype_ = c10::kFloat;
  int64_t live_bucket_bytes_ = 0;
  int64_t peak_bucket_bytes_ = 0;
};

StrategyTraits traits() {
  StrategyTraits t;
  t.zero_stage = 2;
  t.options.reduce_dtype = true;
  t.options.offload = true;
  t.options.buckets = true;
  t.options.overlap = true;
  t.gradient_sync.overlaps_backward = true;
  t.gradient_sync.after_step = GradientSync::AfterStep::kAllGather;
  t.gradient_sync.max_in_flight = 2;  // launch() waits for the oldest beyond two
  t.options.find_unused_parameters = true;
  // Seen on an H100 (rank threads on cuda:0): launch() waits for its oldest reduce-scatter
  // from a gradient hook, on the one device thread every rank's backward shares.
  t.options.blocks_in_backward = "its wait for the oldest reduce-scatter in flight";
  t.teaching = "ZeRO-2: gradients are sharded too; each rank keeps only its shard's gradients.";
  return t;
}

const StrategyRegistrar registrar({
    "zero2",
    "ZeRO-2: gradients reduce-scattered in buckets, optimizer state and gradients sharded",
    [] { return std::unique_ptr<Strategy>(std::make_unique<Zero2>()); },
    [](const Config& config) {
      ReplicatedStrategy::validate_unused_parameters(config);
      validate_option_support(config, traits().options);
    },
    traits(),
});

}  // namespace
}  // namespace shardscope
