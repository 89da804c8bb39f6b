// `tp`, `pp` and `hybrid`: Megatron-style model parallelism over a layout of d data-parallel
// replicas x p pipeline stages x t tensor-parallel shards (see ParallelLayout). Each rank holds
// one stage's blocks cut into tensor-parallel shards (TensorParallelStage); all ranks of a
// replica compute on the sequences of all of them, so the replicas together train on exactly
// the global batch. A replica's batch is split into m pipeline micro-batches that flow through
// the stages by send/recv under a pipeline schedule (PipelineRuntime: GPipe, 1F1B, or with
// several stages per rank interleaved 1F1B, zero-bubble, ZB-V, DualPipeV); the data-parallel
// dimension then averages gradients across replicas with hand-made DDP buckets, PyTorch's Reducer,
// or buckets plus a ZeRO-1 sharded optimizer.
#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/model/mixed_precision.h"
#include "engine/state/training_state.h"
#include "engine/train/config.h"
#include "engine/train/optimizer_factory.h"
#include "engine/train/strategy_registry.h"
#include "profiling/record/host_tracing.h"
#include "profiling/record/memory_tags.h"
#include "strategies/common/named_group.h"
#include "strategies/common/option_support.h"
#include "strategies/data_parallel/bucket_plan.h"
#include "strategies/data_parallel/gradient_buckets.h"
#include "strategies/data_parallel/gradient_ready_hooks.h"
#include "strategies/data_parallel/reducer_sync.h"
#include "strategies/data_parallel/replicated_strategy.h"
#include "strategies/layout/parallel_layout.h"
#include "strategies/pipeline/pipeline_runtime.h"
#include "strategies/pipeline/pipeline_schedule.h"
#include "strategies/sharded/flat_shard.h"
#include "strategies/sharded/sharded_optimizer.h"
#include "strategies/tensor/tensor_parallel.h"
#include "strategies/tensor/tensor_parallel_stage.h"

namespace shardscope {
namespace {

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
    // Gradients are averaged over the replicas and, with context parallelism, the context
    // ranks too (each computed on part of the same sequences with the same weights).
    const int context = layout_.context;
    if (layout_.data * context > 1)
      data_comm_ = &group(context > 1 ? "dp_cp" : "dp", layout_.gradient_group(ctx.rank));
    if (layout_.tensor * layout_.pipeline > 1)
      model_comm_ = &group("mp", layout_.model_group(ctx.rank));
    replica_comm_ = model_comm_;
    cp::Ring ring;
    if (context > 1) {
      ring = {&group("cp", layout_.context_group(ctx.rank)), at_.context, context};
      replica_comm_ = &group("replica", layout_.replica_group(ctx.rank));
      positions_ = cp::zigzag_positions(config.model.seq, at_.context, context).to(ctx.device);
    }

    const std::string& kind = config.strategy_options.schedule;
    stages_per_rank_ = pipeline_stages_per_rank(config);
    PipelineRuntime::Setup pipeline{
        kind,           at_.pipeline, layout_.pipeline,        stages_per_rank_, micro_batches_,
        pipeline_comm_, {},           &config.strategy_options};
    for (int s : pipeline::rank_stages(kind, at_.pipeline, layout_.pipeline, stages_per_rank_)) {
      chunks_.push_back(
          std::make_unique<TensorParallelStage>(config, stage_spec(s), *tensor_comm_, ctx.device));
      if (context > 1) chunks_.back()->set_context(ring, positions_);
      pipeline.chunks.push_back(chunks_.back().get());
      for (size_t i = 0; i < chunks_.back()->trainable().size(); ++i) {
        trainable_.push_back(chunks_.back()->trainable()[i]);
        trainable_names_.push_back(chunks_.back()->trainable_names()[i]);
        chunk_of_param_.push_back(chunks_.size() - 1);
      }
    }
    runtime_ = std::make_unique<PipelineRuntime>(std::move(pipeline));
    armed_.assign(chunks_.size(), false);
    const auto& trainable = trainable_;
    const StrategyOptions& options = config.strategy_options;
    const bool zero1 = data_comm_ && options.data_parallel_sync == "zero1";
    if (data_comm_ && options.data_parallel_sync == "torch_ddp") {
      reducer_ = std::make_unique<ReducerSync>(
          trainable, trainable_names_, *data_comm_, options,
          bucket_cap_bytes(options.bucket_mb, gradient_bytes(trainable)));
    } else if (data_comm_) {
      buckets_ = std::make_unique<GradientBuckets>(
          trainable, *data_comm_, bucket_cap_bytes(options.bucket_mb, gradient_bytes(trainable)),
          gradient_reduce_dtype(options), options.overlap);
      ready_.assign(trainable.size(), false);
      hooks_.attach(trainable, [this](size_t i) {
        if (armed_[chunk_of_param_[i]]) mark_ready(i);
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
    Batch replica = gather_replica_batch(batch);
    if (positions_.defined()) {  // this context rank's chunks of every sequence
      replica = {replica.inputs.index_select(1, positions_),
                 replica.targets.index_select(1, positions_)};
    }
    const int64_t chunk = replica.inputs.size(0) / micro_batches_;
    PipelineRuntime::Hooks hooks;
    // The passes that end accumulation for a chunk are the ones whose gradients are synchronised.
    hooks.before_last_gradients = [this](size_t c, const torch::Tensor& output) {
      if (reducer_) reducer_->arm({output});
      armed_[c] = buckets_ != nullptr;
    };
    // A weight pass accumulates outside autograd, so no gradient hook saw it.
    hooks.after_weight_pass = [this](size_t c, bool last) {
      for (size_t i = 0; i < trainable_.size(); ++i) {
        profiling::tag_memory(trainable_[i].grad(), profiling::MemoryKind::kGradients);
        if (last && armed_[c] && chunk_of_param_[i] == c && trainable_[i].grad().defined()) {
          mark_ready(i);
        }
      }
    };
    hooks.after_backward = [this] {
      if (reducer_) reducer_->after_backward();
    };
    const double loss_sum = runtime_->run(replica.inputs.split(chunk), replica.targets.split(chunk),
                                          loss_scale, last_micro, hooks);
    return torch::tensor(loss_sum / micro_batches_, torch::kDouble);
  }

  bool reports_loss() const override { return runtime_->holds_last_stage(); }

  std::string accumulation_span_name(int micro) const override {
    if (layout_.pipeline <= 1) return Strategy::accumulation_span_name(micro);
    return "pipeline of " + std::to_string(micro_batches_) + " micro-batches" +
           (ctx_->config->grad_accum > 1 ? " (accumulation " + std::to_string(micro) + ")" : "");
  }

  void sync_gradients() override {
    if (buckets_) {
      std::vector<bool> used(ready_.size(), true);
      if (ctx_->config->strategy_options.find_unused_parameters)
        used = true_on_any_rank(*data_comm_, ready_);
      buckets_->finish(ready_, used);
      ready_.assign(ready_.size(), false);
    }
    armed_.assign(armed_.size(), false);
    for (auto& c : chunks_) c->complete_replicated_gradients();
  }

  double clip_gradients(double max_norm) override {
    // Over the replica: tensor-sharded parameters count on every rank, those replicated across
    // the tensor group once (on its first rank), every stage its own. Replicas agree already.
    std::vector<torch::Tensor> counted, uncounted;
    auto& replicated_into = at_.tensor == 0 ? counted : uncounted;
    for (auto& c : chunks_) {
      for (auto& p : c->sharded()) counted.push_back(p);
      for (auto& p : c->replicated()) replicated_into.push_back(p);
    }
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
    for (auto p : trainable_) p.mutable_grad() = torch::Tensor();
  }

  NamedTensors full_weights() override {
    std::vector<NamedTensors> mine;  // per chunk
    for (auto& c : chunks_) mine.push_back(c->gathered_weights());
    if (!pipeline_comm_) {
      NamedTensors all;
      for (auto& part : mine) all.insert(all.end(), part.begin(), part.end());
      return all;
    }
    // Every stage's weights broadcast from its rank down the pipeline: shapes are known everywhere.
    const std::string& kind = ctx_->config->strategy_options.schedule;
    const auto held = pipeline::rank_stages(kind, at_.pipeline, layout_.pipeline, stages_per_rank_);
    NamedTensors out;
    for (int s = 0; s < layout_.pipeline * stages_per_rank_; ++s) {
      const auto shapes = chunks_.front()->full_shapes(stage_spec(s));
      int64_t numel = 0;
      for (const auto& [name, shape] : shapes) numel += c10::multiply_integers(shape);
      torch::Tensor flat;
      const auto at = std::find(held.begin(), held.end(), s);
      if (at != held.end()) {
        std::vector<torch::Tensor> own;
        for (const auto& [name, tensor] : mine[at - held.begin()]) own.push_back(tensor);
        flat = at::flatten_dense_tensors(own);
      } else {
        flat = torch::empty({numel});
      }
      pipeline_comm_->broadcast(flat,
                                pipeline::stage_rank(kind, s, layout_.pipeline, stages_per_rank_));
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
    const auto& trainable = trainable_;
    std::vector<std::vector<StateBinding::Entry>> all_entries;
    for (auto& c : chunks_) {
      for (auto& entries : c->state_entries()) all_entries.push_back(std::move(entries));
    }
    for (auto& entries : all_entries) {
      const torch::Tensor& local = entries.front().key;
      const auto found = std::find_if(trainable.begin(), trainable.end(),
                                      [&](const torch::Tensor& t) { return t.is_same(local); });
      if (found == trainable.end() || !sharded_optimizer_) {
        for (auto& entry : entries) {
          entry.written = entry.written && at_.data == 0 && at_.context == 0;
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
    for (const auto& p : trainable_) trainable += p.nbytes();
    for (const auto& c : chunks_) bytes.parameters += c->parameter_bytes();
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
    return named_group(*ctx_, kind, ranks);
  }

  StageSpec stage_spec(int stage) const {
    const int stages = layout_.pipeline * stages_per_rank_;
    const auto blocks = stage_blocks(ctx_->config->model, stages)[stage];
    return {blocks.first, blocks.second, stage == 0, stage == stages - 1};
  }

  // The sequences of every rank of this replica, in rank order.
  Batch gather_replica_batch(const Batch& batch) {
    if (!replica_comm_) return batch;
    return {tp::all_gather_stacked(batch.inputs, *replica_comm_).flatten(0, 1),
            tp::all_gather_stacked(batch.targets, *replica_comm_).flatten(0, 1)};
  }

  void mark_ready(size_t i) {
    ready_[i] = true;
    buckets_->ready(i);
  }

  RankContext* ctx_ = nullptr;
  ParallelLayout layout_;
  ParallelLayout::Coordinates at_;
  int micro_batches_ = 1;
  Comm* tensor_comm_ = nullptr;
  Comm* pipeline_comm_ = nullptr;  // null with one stage
  Comm* data_comm_ = nullptr;      // averages gradients: null with one replica and context rank
  Comm* model_comm_ = nullptr;     // tp x pp of one context rank: null when that is one rank
  Comm* replica_comm_ = nullptr;   // every rank of the replica: null when it is one rank
  torch::Tensor positions_;        // context parallelism: this rank's tokens in each sequence
  int stages_per_rank_ = 1;
  std::vector<std::unique_ptr<TensorParallelStage>> chunks_;  // this rank's stages
  std::vector<torch::Tensor> trainable_;                      // every chunk's, in chunk order
  std::vector<std::string> trainable_names_;
  std::vector<size_t> chunk_of_param_;
  std::unique_ptr<PipelineRuntime> runtime_;
  std::vector<bool> armed_;  // per chunk: its last gradients of the step are being computed
  std::unique_ptr<GradientBuckets> buckets_;
  std::unique_ptr<ReducerSync> reducer_;
  GradientReadyHooks hooks_;
  std::vector<bool> ready_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<ShardedOptimizerState> sharded_optimizer_;
};

// The schedule exists, can run this many stages per rank and micro-batches, and the model has a
// block for every stage.
void validate_pipeline_schedule(const Config& config, const ParallelLayout& layout) {
  const StrategyOptions& options = config.strategy_options;
  const std::string& kind = options.schedule;
  const int v = pipeline_stages_per_rank(config);
  if (auto problem = pipeline::kind_problem(kind); !problem.empty()) {
    throw ConfigError("strategy_options.schedule", problem);
  }
  if (auto problem = pipeline::stages_per_rank_problem(kind, v); !problem.empty()) {
    throw ConfigError("strategy_options.stages_per_rank", problem);
  }
  const int m = pipeline_micro_batches(config, layout);
  if (auto problem = pipeline::micro_batches_problem(kind, layout.pipeline, m); !problem.empty()) {
    throw ConfigError("strategy_options.micro_batches", problem);
  }
  if (v == 1) return;
  if (layout.pipeline * v > config.model.layers) {
    throw ConfigError("strategy_options.stages_per_rank",
                      std::to_string(layout.pipeline) + " ranks x " + std::to_string(v) +
                          " stages for " + std::to_string(config.model.layers) +
                          " blocks: every stage needs at least one block");
  }
  // PyTorch's Reducer expects one backward per step to finish each parameter's gradient.
  if (layout.data * layout.context > 1 && options.data_parallel_sync == "torch_ddp") {
    throw ConfigError("strategy_options.data_parallel_sync",
                      kind +
                          " finishes a stage's gradients in several passes, which "
                          "torch_ddp's Reducer does not follow: use ddp_bucketed or zero1");
  }
}

// What tp, pp and hybrid read: the layout, and the options of their data-parallel sync.
OptionSupport model_parallel_options() {
  OptionSupport support;
  support.layout = true;
  support.activation_checkpointing = false;
  support.sequence_parallel = true;
  support.context_parallel = true;
  support.offload = true;  // under --dp-sync zero1 with replicas only (validate_model_parallel)
  support.buckets = true;
  support.overlap = true;
  support.find_unused_parameters = true;
  return support;
}

void validate_model_parallel(const Config& config) {
  if (config.model.experts > 0) {
    throw ConfigError("model.experts", config.strategy +
                                           " builds its blocks from its own tensor-parallel "
                                           "layers, which have no mixture-of-experts form yet: "
                                           "use a data-parallel strategy or cp");
  }
  const ParallelLayout layout = layout_of(config);
  validate_layout(config, layout);
  const StrategyOptions& options = config.strategy_options;
  validate_pipeline_schedule(config, layout);
  // The ranks that average gradients: replicas, and context ranks (the same weights).
  const int averaging = layout.data * layout.context;
  if (averaging > 1) ReplicatedStrategy::validate_unused_parameters(config);
  OptionSupport support = model_parallel_options();
  support.offload = averaging > 1 && options.data_parallel_sync == "zero1";
  if (averaging > 1 && options.data_parallel_sync == "torch_ddp") {
    support.blocks_in_backward = "its Reducer's end-of-backward callback";
  }
  if (layout.context > 1) support.blocks_in_backward = "its ring's send/recv inside backward";
  // Seen on an H100 (4 rank threads on cuda:0): the first rank's blocking all-reduce inside
  // backward held the one device thread while its peers' backward waited behind it.
  if (layout.tensor > 1) support.blocks_in_backward = "its all-reduce inside backward";
  validate_option_support(config, support);
}

StrategyInfo model_parallel(const char* name, const char* description, const char* world_dimension,
                            const char* teaching) {
  StrategyTraits traits;
  traits.options = model_parallel_options();
  traits.family = StrategyFamily::kModelParallel;
  traits.world_dimension = world_dimension;
  traits.teaching = teaching;
  // The ranks of one pipeline stage (and context rank) compute the same shapes: tensor shards
  // split every matrix evenly, data replicas repeat them on other sequences.
  traits.work_class = [](const Config& config, int rank) {
    const ParallelLayout layout = layout_of(config);
    const ParallelLayout::Coordinates at = layout.coordinates(rank);
    return config.model.experts > 0 ? rank : at.pipeline * layout.context + at.context;
  };
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
