// `cp`: context parallelism (ring attention, as in Megatron-Core, torchtitan and picotron). The
// world is d data-parallel replicas of c ranks each (context ranks adjacent); the c ranks of a
// replica compute on the sequences of all of them, each holding 2 of every sequence's 2c chunks
// (zig-zag: chunk i and chunk 2c-1-i, so causal attention costs every rank the same). Everything
// but attention is token-wise and needs no communication; attention passes key/value blocks
// around the ring (strategies/context/ring_attention.h). Every rank holds every weight: the
// gradients of all d x c ranks are averaged with ddp_bucketed's buckets, each rank's loss counting
// its tokens c times over, which is the single device's gradient. --dp-sync zero1 shards the
// optimizer state over those d x c ranks as well.
#include "strategies/context/context_parallel.h"

#include "engine/model/core_attention.h"

#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/model/mixed_precision.h"
#include "engine/train/config.h"
#include "engine/train/strategy_registry.h"
#include "strategies/common/named_group.h"
#include "strategies/common/option_support.h"
#include "strategies/context/ring_attention.h"
#include "strategies/data_parallel/bucketed_data_parallel.h"
#include "strategies/tensor/tensor_parallel.h"

namespace shardscope {

int context_parallel_degree(const Config& config) {
  const int c = config.strategy_options.context_parallel;
  return c > 0 ? c : config.world;
}

namespace {

class ContextParallel final : public BucketedDataParallel {
 protected:
  void configure(const Config& config) override {
    if (config.strategy_options.data_parallel_sync == "zero1") shard_optimizer_state();
  }

  void prepare() override {
    BucketedDataParallel::prepare();  // over the world: every rank averages every gradient
    const Config& config = *ctx_->config;
    const int c = context_parallel_degree(config);
    ring_.ranks = c;
    ring_.rank = ctx_->rank % c;
    ring_.comm = ctx_->comm;  // never used by a ring of one
    if (c > 1) {
      std::vector<int> members;
      for (int r = ctx_->rank - ring_.rank; r < ctx_->rank - ring_.rank + c; ++r)
        members.push_back(r);
      ring_.comm = &named_group(*ctx_, "cp", members);
    }
    positions_ = cp::zigzag_positions(config.model.seq, ring_.rank, c).to(ctx_->device);
    for (size_t i = 0; i < model_->blocks->size(); ++i) {
      model_->blocks[i]->as<Block>()->attn->attention.replace =
          [this](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
            return cp::ring_attention(q, k, v, ring_);
          };
    }
  }

  // This rank's chunks of every sequence of its replica. The loss is its tokens' share of the
  // replica's mean, times c: averaged over all ranks, as the buckets average gradients, that is
  // the mean over the global batch.
  torch::Tensor forward(const Batch& batch) override {
    Batch replica = batch;
    if (ring_.ranks > 1) {
      replica = {tp::all_gather_stacked(batch.inputs, *ring_.comm).flatten(0, 1),
                 tp::all_gather_stacked(batch.targets, *ring_.comm).flatten(0, 1)};
    }
    const auto tokens = replica.inputs.index_select(1, positions_);
    const auto targets = replica.targets.index_select(1, positions_);
    ComputePrecisionScope precision(ctx_->config->strategy_options, ctx_->device.type());
    const auto logits = model_->forward(tokens, positions_);
    const auto summed = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}).to(torch::kFloat), targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    return summed *
           (static_cast<double>(ring_.ranks) / static_cast<double>(replica.targets.numel()));
  }

 private:
  cp::Ring ring_;
  torch::Tensor positions_;  // of this rank's tokens in their sequences
};

// What cp reads: its degree, a dp sync for the replicas (whose buckets and offload it takes on).
OptionSupport context_parallel_options() {
  OptionSupport support;
  support.reduce_dtype = true;
  support.offload = true;  // under --dp-sync zero1 only (validate_context_parallel)
  // A block recomputed in backward runs its ring again there: every rank recomputes the same
  // blocks in the same order, so the sends still pair up.
  support.activation_checkpointing = true;
  support.data_parallel_sync = true;
  support.context_parallel = true;
  support.buckets = true;
  support.overlap = true;
  support.find_unused_parameters = true;
  support.blocks_in_backward = "its ring's send/recv inside attention's backward";
  return support;
}

void validate_context_parallel(const Config& config) {
  const int c = context_parallel_degree(config);
  const std::string field = "strategy_options.context_parallel";
  if (config.world % c != 0) {
    throw ConfigError(field, "cp " + std::to_string(c) + " does not divide world " +
                                 std::to_string(config.world) +
                                 " (the world is data-parallel replicas of cp ranks)");
  }
  if (config.model.seq % (2 * c) != 0) {
    throw ConfigError(field, "model.seq " + std::to_string(config.model.seq) +
                                 " cannot be cut into 2 x " + std::to_string(c) +
                                 " equal chunks (each rank holds an early and a late one)");
  }
  if (attention_settings(config.model).unfused) {
    throw ConfigError("model.attention",
                      "cp runs its own ring attention (SDPA's kernels on each pair of chunks), "
                      "not unfused");
  }
  const std::string& sync = config.strategy_options.data_parallel_sync;
  if (sync != "ddp_bucketed" && sync != "zero1") {
    throw ConfigError("strategy_options.data_parallel_sync",
                      "cp averages gradients over its data x context ranks with ddp_bucketed or "
                      "zero1, not '" +
                          sync + "'");
  }
  if (config.backend == "nccl") {
    // Each ring step posts a send to the next rank, then a receive from the previous one; NCCL
    // runs them in that order on one stream per pair, so two neighbours would each wait for the
    // other's receive (NVIDIA/nccl#479) unless the pair is grouped, which Comm does not do yet.
    throw ConfigError("backend",
                      "cp's ring runs over gloo only (its ungrouped send/recv pairs "
                      "would deadlock under nccl)");
  }
  ReplicatedStrategy::validate_unused_parameters(config);
  OptionSupport support = context_parallel_options();
  support.offload = sync == "zero1";
  validate_option_support(config, support);
}

StrategyTraits traits() {
  StrategyTraits t;
  t.family = StrategyFamily::kContextParallel;
  t.options = context_parallel_options();
  t.world_dimension = "context";
  t.teaching =
      "Context parallelism (ring attention): each sequence is split over --cp ranks, each "
      "holding an early and a late chunk. Key/value blocks travel around the ring by send/recv "
      "under the attention compute of the block in hand; activations per rank fall as 1/cp.";
  return t;
}

const StrategyRegistrar registrar({
    "cp",
    "context parallel (ring attention): each sequence split over --cp ranks (default all; the "
    "rest data-parallel with --dp-sync ddp_bucketed or zero1)",
    [] { return std::unique_ptr<Strategy>(std::make_unique<ContextParallel>()); },
    validate_context_parallel,
    traits(),
});

}  // namespace
}  // namespace shardscope
