// `tp`, `pp` and `hybrid`: Megatron-style model parallelism over a layout of d data-parallel
// replicas x p pipeline stages x t tensor-parallel shards (see ParallelLayout). Each rank holds
// one stage's blocks cut into tensor-parallel shards (TensorParallelStage); all ranks of a
// replica compute on the sequences of all of them, so the replicas together train on exactly
// the global batch. A replica's batch is split into m pipeline micro-batches that flow through
// the stages by send/recv under a GPipe or 1F1B schedule; the data-parallel dimension then
// averages gradients across replicas with hand-made DDP buckets, PyTorch's Reducer, or buckets
// plus a ZeRO-1 sharded optimizer.
#include <torch/torch.h>

#include "engine/comm.h"
#include "engine/config.h"
#include "engine/mixed_precision.h"
#include "engine/optimizer_factory.h"
#include "engine/strategy_registry.h"
#include "engine/training_state.h"
#include "profiling/host_tracing.h"
#include "profiling/memory_tags.h"
#include "strategies/bucket_plan.h"
#include "strategies/flat_shard.h"
#include "strategies/gradient_buckets.h"
#include "strategies/gradient_ready_hooks.h"
#include "strategies/option_support.h"
#include "strategies/parallel_layout.h"
#include "strategies/pipeline_schedule.h"
#include "strategies/reducer_sync.h"
#include "strategies/replicated_strategy.h"
#include "strategies/sharded_optimizer.h"
#include "strategies/tensor_parallel.h"
#include "strategies/tensor_parallel_stage.h"

namespace shardscope {
namespace {

// Point-to-point tags: activations travel down the pipeline, their gradients back up.
constexpr int kActivationTag = 0;
constexpr int kGradientTag = 1;

class ModelParallelStrategy final : public Strategy {
 public:
  void setup(RankContext& ctx) override {
    ctx_ = &ctx;
    const Config& config = *ctx.config;
    layout_ = layout_of(config);
    at_ = layout_.coordinates(ctx.rank);
    micro_batches_ = pipeline_micro_batches(config, layout_);
    tensor_comm_ = &group("tp", layout_.tensor_group(ctx.rank));
    if (layout_.pipeline > 1) pipeline_comm_ = &group("pp", layout_.pipeline_group(ctx.rank));
    if (layout_.data > 1) data_comm_ = &group("dp", layout_.data_group(ctx.rank));
    if (layout_.tensor * layout_.pipeline > 1)
      model_comm_ = &group("mp", layout_.model_group(ctx.rank));

    stage_ = std::make_unique<TensorParallelStage>(config, stage_spec(at_.pipeline), *tensor_comm_,
                                                   ctx.device);
    actions_ = pipeline::schedule(config.strategy_options.schedule, at_.pipeline, layout_.pipeline,
                                  micro_batches_);
    const auto& trainable = stage_->trainable();
    const StrategyOptions& options = config.strategy_options;
    const bool zero1 = data_comm_ && options.data_parallel_sync == "zero1";
    if (data_comm_ && options.data_parallel_sync == "torch_ddp") {
      reducer_ = std::make_unique<ReducerSync>(
          trainable, stage_->trainable_names(), *data_comm_, options,
          bucket_cap_bytes(options.bucket_mb, gradient_bytes(trainable)));
    } else if (data_comm_) {
      buckets_ = std::make_unique<GradientBuckets>(
          trainable, *data_comm_, bucket_cap_bytes(options.bucket_mb, gradient_bytes(trainable)),
          gradient_reduce_dtype(options), options.overlap);
      ready_.assign(trainable.size(), false);
      hooks_.attach(trainable, [this](size_t i) {
        if (!syncing_) return;
        ready_[i] = true;
        buckets_->ready(i);
      });
    }
    if (zero1) {
      sharded_optimizer_ = std::make_unique<ShardedOptimizerState>(
          trainable, *data_comm_, config.optimizer, options.offload);
    } else {
      optimizer_ = make_optimizer(config.optimizer, trainable);
    }
  }

  torch::Tensor forward_backward(const Batch& batch, bool last_micro, double loss_scale) override {
    if (reducer_) reducer_->before_forward();
    const Batch replica = gather_replica_batch(batch);
    const int64_t chunk = replica.inputs.size(0) / micro_batches_;
    const auto inputs = replica.inputs.split(chunk), targets = replica.targets.split(chunk);
    const bool first = at_.pipeline == 0, last = at_.pipeline == layout_.pipeline - 1;
    const auto activation_options =
        torch::TensorOptions().dtype(torch::kFloat).device(ctx_->device);
    struct InFlight {
      torch::Tensor input;   // received activation (a leaf whose gradient goes back)
      torch::Tensor output;  // the stage's hidden state, or the loss on the last stage
    };
    std::vector<InFlight> in_flight(micro_batches_);
    // A send's buffer lives until the send completes. An activation's send has completed once
    // its gradient came back; a gradient's send is waited for before the next one, by when the
    // previous stage has long posted its receive. So buffers do not pile up with m.
    std::vector<std::pair<CommWork, torch::Tensor>> activation_sends(micro_batches_);
    std::pair<CommWork, torch::Tensor> gradient_send;
    double loss_sum = 0.0;
    for (size_t k = 0; k < actions_.size(); ++k) {
      const pipeline::Action& action = actions_[k];
      InFlight& slot = in_flight[action.micro];
      const std::string label = " micro-batch " + std::to_string(action.micro);
      if (action.pass == pipeline::Pass::kForward) {
        torch::Tensor input = inputs[action.micro];
        if (!first) {
          // Received, then saved for backward: an activation of this stage.
          input = torch::empty(stage_->hidden_shape(chunk), activation_options);
          pipeline_comm_->recv(input, at_.pipeline - 1, kActivationTag);
          input.requires_grad_(true);
        }
        profiling::ScopedSpan span(profiling::Category::kForward, "forward" + label);
        ComputePrecisionScope precision(ctx_->config->strategy_options, ctx_->device.type());
        slot = {input, stage_->forward(input, targets[action.micro])};
        if (last) {
          loss_sum += slot.output.detach().item<double>();
        } else {
          profiling::MemoryTag tag(profiling::MemoryKind::kCommBuffers);
          auto buffer = slot.output.detach().to(torch::kFloat).contiguous();
          activation_sends[action.micro] = {
              pipeline_comm_->send_async(buffer, at_.pipeline + 1, kActivationTag), buffer};
        }
        continue;
      }
      // The backward that ends accumulation is the one whose gradients are synchronised.
      if (last_micro && k + 1 == actions_.size()) arm_gradient_sync(slot.output);
      torch::Tensor grad;
      if (!last) {
        profiling::MemoryTag tag(profiling::MemoryKind::kCommBuffers);
        grad = torch::empty(stage_->hidden_shape(chunk), activation_options);
        pipeline_comm_->recv(grad, at_.pipeline + 1, kGradientTag);
        activation_sends[action.micro].first.wait();
        activation_sends[action.micro] = {};
      }
      {
        profiling::ScopedSpan span(profiling::Category::kBackward, "backward" + label);
        if (last) {
          (slot.output * (loss_scale / micro_batches_)).backward();
        } else {
          slot.output.backward(grad.to(slot.output.dtype()));
        }
      }
      if (reducer_) reducer_->after_backward();
      for (const auto& p : stage_->trainable())
        profiling::tag_memory(p.grad(), profiling::MemoryKind::kGradients);
      if (!first) {
        gradient_send.first.wait();
        auto buffer = slot.input.grad().contiguous();
        profiling::tag_memory(buffer, profiling::MemoryKind::kCommBuffers);
        gradient_send = {pipeline_comm_->send_async(buffer, at_.pipeline - 1, kGradientTag),
                         buffer};
      }
      slot = {};  // this micro-batch's activations are freed
    }
    gradient_send.first.wait();
    return torch::tensor(loss_sum / micro_batches_, torch::kDouble);
  }

  bool reports_loss() const override { return at_.pipeline == layout_.pipeline - 1; }

  void sync_gradients() override {
    if (buckets_) {
      std::vector<bool> used(ready_.size(), true);
      if (ctx_->config->strategy_options.find_unused_parameters)
        used = true_on_any_rank(*data_comm_, ready_);
      buckets_->finish(ready_, used);
      ready_.assign(ready_.size(), false);
      syncing_ = false;
    }
    stage_->complete_replicated_gradients();
  }

  double clip_gradients(double max_norm) override {
    // Over the replica: tensor-sharded parameters count on every rank, those replicated across
    // the tensor group once (on its first rank), every stage its own. Replicas agree already.
    std::vector<torch::Tensor> counted = stage_->sharded(), uncounted;
    auto& replicated_into = at_.tensor == 0 ? counted : uncounted;
    for (auto& p : stage_->replicated()) replicated_into.push_back(p);
    Comm& replica = model_comm_ ? *model_comm_ : *tensor_comm_;
    return clip_sharded_gradients(replica, counted, max_norm, {}, uncounted);
  }

  void optimizer_step(double lr) override {
    if (sharded_optimizer_) {
      sharded_optimizer_->step(lr);
      return;
    }
    set_learning_rate(*optimizer_, lr);
    optimizer_->step();
  }

  void zero_grad() override {
    for (auto p : stage_->trainable()) p.mutable_grad() = torch::Tensor();
  }

  NamedTensors full_weights() override {
    NamedTensors mine = stage_->gathered_weights();
    if (!pipeline_comm_) return mine;
    // Every stage's weights broadcast from it down its pipeline: shapes are known everywhere.
    NamedTensors out;
    for (int s = 0; s < layout_.pipeline; ++s) {
      const auto shapes = stage_->full_shapes(stage_spec(s));
      int64_t numel = 0;
      for (const auto& [name, shape] : shapes) numel += c10::multiply_integers(shape);
      torch::Tensor flat;
      if (s == at_.pipeline) {
        std::vector<torch::Tensor> own;
        for (const auto& [name, tensor] : mine) own.push_back(tensor);
        flat = at::flatten_dense_tensors(own);
      } else {
        flat = torch::empty({numel});
      }
      pipeline_comm_->broadcast(flat, s);
      int64_t offset = 0;  // the weights are views into the broadcast buffer
      for (const auto& [name, shape] : shapes) {
        const int64_t n = c10::multiply_integers(shape);
        out.emplace_back(name, flat.narrow(0, offset, n).view(shape));
        offset += n;
      }
    }
    return out;
  }

  bool replicated() const override { return layout_.tensor * layout_.pipeline == 1; }

  void bind_state(StateBinding& binding) override {
    // The first data-parallel replica writes its stage's shards, or under ZeRO-1 each shard's
    // owner in the data-parallel group; every rank loads what its stage holds.
    const auto& trainable = stage_->trainable();
    for (auto& entries : stage_->state_entries()) {
      const torch::Tensor& local = entries.front().key;
      const auto found = std::find_if(trainable.begin(), trainable.end(),
                                      [&](const torch::Tensor& t) { return t.is_same(local); });
      if (found == trainable.end() || !sharded_optimizer_) {
        for (auto& entry : entries) {
          entry.written = entry.written && at_.data == 0;
          if (found != trainable.end()) entry.optimizer = optimizer_.get();
          binding.add(std::move(entry));
        }
        continue;
      }
      sharded_optimizer_->bind(binding, found - trainable.begin(), std::move(entries));
    }
  }

  MemoryBytes memory() const override {
    MemoryBytes bytes;
    int64_t trainable = 0;
    for (const auto& p : stage_->trainable()) trainable += p.nbytes();
    bytes.parameters = stage_->parameter_bytes();
    bytes.gradients = trainable;
    const int64_t stepped = sharded_optimizer_ ? sharded_optimizer_->owned_bytes() : trainable;
    if (sharded_optimizer_ && sharded_optimizer_->host_bytes() > 0) {
      bytes.host = sharded_optimizer_->host_bytes();
    } else {
      bytes.optimizer_state =
          static_cast<int64_t>(stepped * optimizer_state_ratio(ctx_->config->optimizer));
    }
    if (buckets_) bytes.comm_buffers = buckets_->buffer_bytes();
    if (reducer_) bytes.comm_buffers = trainable;  // the Reducer's buckets copy every gradient
    return bytes;
  }

 private:
  // A group of this layout, named by its kind and members ("tp{0,1}") so that the trace tells
  // groups apart; the whole world is the world group.
  Comm& group(const std::string& kind, const std::vector<int>& ranks) {
    if (static_cast<int>(ranks.size()) == ctx_->world) return *ctx_->comm;
    std::string name = kind + "{";
    for (size_t i = 0; i < ranks.size(); ++i) name += (i ? "," : "") + std::to_string(ranks[i]);
    return ctx_->subgroup(name + "}", ranks);
  }

  StageSpec stage_spec(int stage) const {
    const auto blocks = stage_blocks(ctx_->config->model, layout_.pipeline)[stage];
    return {blocks.first, blocks.second, stage == 0, stage == layout_.pipeline - 1};
  }

  // The sequences of every rank of this replica, in rank order.
  Batch gather_replica_batch(const Batch& batch) {
    if (!model_comm_) return batch;
    return {tp::all_gather_stacked(batch.inputs, *model_comm_).flatten(0, 1),
            tp::all_gather_stacked(batch.targets, *model_comm_).flatten(0, 1)};
  }

  void arm_gradient_sync(const torch::Tensor& output) {
    if (reducer_) reducer_->arm({output});
    syncing_ = buckets_ != nullptr;
  }

  RankContext* ctx_ = nullptr;
  ParallelLayout layout_;
  ParallelLayout::Coordinates at_;
  int micro_batches_ = 1;
  Comm* tensor_comm_ = nullptr;
  Comm* pipeline_comm_ = nullptr;  // null with one stage
  Comm* data_comm_ = nullptr;      // null with one replica
  Comm* model_comm_ = nullptr;     // null when a replica is one rank
  std::unique_ptr<TensorParallelStage> stage_;
  std::vector<pipeline::Action> actions_;
  std::unique_ptr<GradientBuckets> buckets_;
  std::unique_ptr<ReducerSync> reducer_;
  GradientReadyHooks hooks_;
  std::vector<bool> ready_;
  bool syncing_ = false;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<ShardedOptimizerState> sharded_optimizer_;
};

void validate_model_parallel(const Config& config) {
  const ParallelLayout layout = layout_of(config);
  validate_layout(config, layout);
  const StrategyOptions& options = config.strategy_options;
  if (layout.data > 1) ReplicatedStrategy::validate_unused_parameters(config);
  OptionSupport support;
  support.layout = true;
  support.activation_checkpointing = false;
  support.sequence_parallel = true;
  support.offload = layout.data > 1 && options.data_parallel_sync == "zero1";
  if (layout.data > 1 && options.data_parallel_sync == "torch_ddp") {
    support.blocks_in_backward = "its Reducer's end-of-backward callback";
  }
  validate_option_support(config, support);
}

StrategyInfo model_parallel(const char* name, const char* description, const char* world_dimension,
                            const char* teaching) {
  StrategyTraits traits;
  traits.family = "model parallel";
  traits.world_dimension = world_dimension;
  traits.teaching = teaching;
  return {name, description,
          [] { return std::unique_ptr<Strategy>(std::make_unique<ModelParallelStrategy>()); },
          validate_model_parallel, traits};
}

const StrategyRegistrar tp_registrar(model_parallel(
    "tp",
    "tensor parallel (Megatron): heads, MLP and vocabulary split over --tp ranks (default all; "
    "the rest data-parallel)",
    "tensor",
    "Tensor parallelism (Megatron): each block's matrices are split across ranks; two "
    "all_reduces per block in forward and two in backward sit on the critical path."));
const StrategyRegistrar pp_registrar(model_parallel(
    "pp",
    "pipeline parallel: --pp parameter-balanced stages (default all ranks), --micro-batches "
    "through a 1f1b or gpipe --schedule",
    "pipeline",
    "Pipeline parallelism: stages of blocks pass activations with send/recv; the gaps before "
    "the first and after the last micro-batch are the bubble, (p-1)/(m+p-1) of the step."));
const StrategyRegistrar hybrid_registrar(model_parallel(
    "hybrid",
    "data x tensor x pipeline parallel: --tp, --pp, the rest data-parallel with --dp-sync", "",
    "Data x tensor x pipeline parallel: tensor groups innermost, pipeline outermost; each "
    "dimension talks over its own sub-group (tp{..}, dp{..}, pp{..})."));

}  // namespace
}  // namespace shardscope
