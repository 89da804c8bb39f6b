// `torch_ddp`: PyTorch's own data-parallel engine, c10d::Reducer, driven from C++ the way
// torch.nn.parallel.DistributedDataParallel drives it from Python: rank 0's weights broadcast at
// start, gradients bucketed in reverse order and all-reduced as buckets fill during backward,
// no synchronisation on accumulation micro-batches (DDP's no_sync), buckets rebuilt after the
// first iteration in the order gradients actually arrived.
#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/launch/backward_thread.h"
#include "engine/train/config.h"
#include "engine/train/strategy_registry.h"
#include "strategies/common/option_support.h"
#include "strategies/data_parallel/bucket_plan.h"
#include "strategies/data_parallel/reducer_sync.h"
#include "strategies/data_parallel/replicated_strategy.h"

namespace shardscope {
namespace {

class TorchDdp final : public ReplicatedStrategy {
 public:
  void setup(RankContext& ctx) override {
    ReplicatedStrategy::setup(ctx);
    broadcast_parameters(/*root=*/0);
    std::vector<std::string> names;
    for (const auto& [name, p] : model_->named_params()) {
      if (p.requires_grad()) names.push_back(name);
    }
    reducer_ = std::make_unique<ReducerSync>(
        trainable_, names, *ctx.comm, ctx.config->strategy_options,
        bucket_cap_bytes(ctx.config->strategy_options.bucket_mb, gradient_bytes(trainable_)));
  }

  torch::Tensor forward_backward(const Batch& batch, bool last_micro, double loss_scale) override {
    reducer_->before_forward();
    auto loss = forward(batch);
    auto scaled = loss * loss_scale;
    // Only the micro-batch that ends accumulation arms the reducer's hooks; the others just
    // accumulate into .grad, exactly like DDP's no_sync().
    if (last_micro) reducer_->arm({scaled});
    run_backward_pass([&] { scaled.backward(); });
    if (last_micro) reducer_->after_backward();
    tag_gradients();
    return loss.detach();
  }

  MemoryBytes memory() const override {
    MemoryBytes bytes = ReplicatedStrategy::memory();
    bytes.comm_buffers = bytes.gradients;  // buckets hold a copy of every gradient
    return bytes;
  }

 private:
  std::unique_ptr<ReducerSync> reducer_;
};

StrategyTraits traits() {
  StrategyTraits t;
  t.baseline = true;
  t.data_parallel_sync = true;
  // The Reducer always overlaps; it finalises backward when the (inner) backward of a
  // recomputed block ends: PyTorch needs static_graph for reentrant checkpointing, which this
  // engine does not set.
  t.options.activation_checkpointing = false;
  t.options.buckets = true;
  t.gradient_sync.overlaps_backward = true;  // the Reducer's buckets, always
  t.gradient_sync.small_first_bucket = true;
  t.options.find_unused_parameters = true;
  t.options.blocks_in_backward = "its Reducer's end-of-backward callback";
  t.teaching =
      "PyTorch's own DDP engine (c10d::Reducer): buckets in reverse order, reduced during "
      "backward. The baseline the others are compared with.";
  return t;
}

const StrategyRegistrar registrar({
    "torch_ddp",
    "PyTorch's DDP engine (c10d::Reducer): bucketed all-reduce overlapped with backward",
    [] { return std::unique_ptr<Strategy>(std::make_unique<TorchDdp>()); },
    [](const Config& config) {
      ReplicatedStrategy::validate_unused_parameters(config);
      validate_option_support(config, traits().options);
    },
    traits(),
});

}  // namespace
}  // namespace shardscope
