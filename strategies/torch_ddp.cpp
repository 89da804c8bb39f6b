// `torch_ddp`: PyTorch's own data-parallel engine, c10d::Reducer, driven from C++ the way
// torch.nn.parallel.DistributedDataParallel drives it from Python: rank 0's weights broadcast at
// start, gradients bucketed in reverse order and all-reduced as buckets fill during backward,
// no synchronisation on accumulation micro-batches (DDP's no_sync), buckets rebuilt after the
// first iteration in the order gradients actually arrived.
#include <limits>

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "engine/comm.h"
#include "engine/config.h"
#include "engine/strategy_registry.h"
#include "strategies/option_support.h"
#include "strategies/replicated_strategy.h"

namespace shardscope {
namespace {

// DDP's first bucket is kept small so that the last layers' gradients start reducing early.
constexpr int64_t kDefaultFirstBucketBytes = 1024 * 1024;

// Routes the Reducer's bucket all-reduces through our traced Comm. With a hook installed the
// Reducer no longer divides by the world size, so the hook averages.
class TracedAllReduceHook final : public c10d::CppCommHookInterface<Comm*> {
 public:
  explicit TracedAllReduceHook(Comm* comm) : c10d::CppCommHookInterface<Comm*>(comm) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    at::Tensor& buffer = bucket.getBufferRef();
    buffer.div_(state_->size());
    return state_->all_reduce_async(buffer).future({buffer});
  }
};

class TorchDdp final : public ReplicatedStrategy {
 public:
  void setup(RankContext& ctx) override {
    ReplicatedStrategy::setup(ctx);
    broadcast_parameters(/*root=*/0);

    const StrategyOptions& options = ctx.config->strategy_options;
    find_unused_ = options.find_unused_parameters;
    const bool default_cap = options.bucket_mb == 0.0;
    const int64_t cap = bucket_cap_bytes(*ctx.config);
    // As DDP does: before the first backward the real gradient order is unknown, so without
    // unused-parameter detection everything starts in one bucket and is re-bucketed later.
    std::vector<size_t> limits{std::numeric_limits<size_t>::max()};
    if (find_unused_) {
      limits = default_cap ? std::vector<size_t>{kDefaultFirstBucketBytes, static_cast<size_t>(cap)}
                           : std::vector<size_t>{static_cast<size_t>(cap)};
    }
    std::vector<bool> sparse(trainable_.size(), false);
    auto [buckets, per_bucket_limits] =
        c10d::compute_bucket_assignment_by_size(trainable_, limits, sparse);
    (void)per_bucket_limits;
    std::reverse(buckets.begin(), buckets.end());

    std::unordered_map<size_t, std::string> names;
    size_t index = 0;
    for (const auto& [name, p] : model_->named_params()) {
      if (p.requires_grad()) names[index++] = name;
    }
    reducer_ = std::make_shared<c10d::Reducer>(
        trainable_, buckets, ctx.comm->process_group(), sparse, cap, find_unused_,
        /*gradient_as_bucket_view=*/false, names,
        /*first_bucket_bytes_cap=*/default_cap ? kDefaultFirstBucketBytes : cap,
        /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
        /*bucket_bytes_cap_list=*/std::vector<int64_t>{});
    reducer_->register_comm_hook(std::make_unique<TracedAllReduceHook>(ctx.comm));
  }

  torch::Tensor forward_backward(const Batch& batch, bool last_micro, double loss_scale) override {
    if (last_micro) reducer_->prepare_for_forward();
    reducer_->rebuild_buckets();
    auto loss = forward(batch);
    auto scaled = loss * loss_scale;
    // Only the micro-batch that ends accumulation arms the reducer's hooks; the others just
    // accumulate into .grad, exactly like DDP's no_sync().
    if (last_micro)
      reducer_->prepare_for_backward(find_unused_ ? std::vector<at::Tensor>{scaled}
                                                  : std::vector<at::Tensor>{});
    scaled.backward();
    return loss.detach();
  }

  MemoryBytes memory() const override {
    MemoryBytes bytes = ReplicatedStrategy::memory();
    bytes.comm_buffers = bytes.gradients;  // buckets hold a copy of every gradient
    return bytes;
  }

 private:
  std::shared_ptr<c10d::Reducer> reducer_;
  bool find_unused_ = false;
};

const StrategyRegistrar registrar({
    "torch_ddp",
    "PyTorch's DDP engine (c10d::Reducer): bucketed all-reduce overlapped with backward",
    [] { return std::unique_ptr<Strategy>(std::make_unique<TorchDdp>()); },
    [](const Config& config) {
      ReplicatedStrategy::validate_unused_parameters(config);
      // The Reducer finalises backward when the (inner) backward of a recomputed block ends:
      // PyTorch needs static_graph for reentrant checkpointing, which this engine does not set.
      OptionSupport support;
      support.activation_checkpointing = false;
      support.blocks_in_backward = "its Reducer's end-of-backward callback";
      validate_option_support(config, support);
    },
});

}  // namespace
}  // namespace shardscope
