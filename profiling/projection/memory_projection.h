#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::profiling {

// A GPT's shape, as the projection needs it (profiling does not depend on the engine's config).
struct ModelShape {
  int64_t vocab = 0, d_model = 0, heads = 0, layers = 0, seq = 0, mlp_ratio = 4;
  bool tie_embeddings = false;
  int64_t experts = 0, top_k = 0;  // a mixture of experts' MLPs per block (0: dense)
  // Each block's attention materialises its s x s scores (not SDPA's flash kernel), and with
  // selective recompute runs again in backward instead of keeping what it saved.
  bool unfused_attention = false, selective_recompute = false;
};

// What the dp dimension shards, by ZeRO stage (the index): nothing, optimizer state, and
// gradients, and parameters. The projection's own names for the four, not strategies' names.
inline constexpr const char* kZeroStages[] = {"ddp", "zero1", "zero2", "zero3"};

// The stage `TrainingLayout::zero` names (0-3), or -1 for a name that is none of them.
int zero_stage_of(const std::string& zero);

// How the model is laid out over GPUs and trained.
struct TrainingLayout {
  std::string zero = kZeroStages[0];  // one of kZeroStages (sharding over the dp dimension)
  int dp = 1, tp = 1, pp = 1;
  // Context parallelism: each sequence split over cp GPUs, so each saves activations for s/cp of
  // its tokens (ring attention keeps no s x s matrix and no other rank's keys between passes).
  int cp = 1;
  // Expert parallelism: each GPU holds E/ep of every layer's experts (its tokens' activations are
  // the same in expectation: it computes as many routed tokens as it sends).
  int ep = 1;
  int micro_batch = 1;    // sequences per (pipeline) micro-batch
  int micro_batches = 1;  // pipeline micro-batches per step
  std::string schedule = "1f1b";
  bool mixed_precision = true;  // bf16 weights and gradients, fp32 master + Adam: K = 12
  // Bytes of an element the matmuls compute in: 4 (fp32) or 2 (bf16); 0: 2 with
  // mixed_precision, else 4. With fp32 weights and bf16 compute (autocast, our bf16), the
  // residual stream stays fp32 and each forward saves bf16 copies of the weights.
  int compute_bytes = 0;
  bool sequence_parallel = false;
  bool activation_checkpointing = false;
  // With fp32 weights and bf16 compute: every micro-batch of a step computes with, and saves, one
  // bf16 copy of each weight (our pipelines keep autocast's casts for the step), instead of each
  // forward making and saving its own.
  bool weight_casts_per_step = false;
  // ZeRO-3 gathers its parameters a unit at a time (the embeddings, a block, the head): one unit
  // whole at once, or two when the next is gathered under the current one's compute.
  bool prefetch = true;
};

// Bytes per GPU by category, from the formulas in DESIGN.md: parameters and gradients 2Ψ each
// and optimizer state 12Ψ in mixed precision (4Ψ, 4Ψ, 8Ψ in fp32 with Adam), Ψ being the GPU's
// own parameters (tensor shards plus the parameters replicated across the tensor group);
// ZeRO-1/2/3 divide optimizer state, then gradients, then parameters by dp; ZeRO-3's parameters
// also count the units it holds gathered at once (two adjacent ones with prefetch, the largest
// pair). Activations: what
// our GPT saves for backward (the derivation is in memory_projection.cpp), times the
// micro-batches a stage holds (GPipe: m; 1F1B: min(p - s, m) at stage s).
struct MemoryProjection {
  double parameters = 0, gradients = 0, optimizer_state = 0, activations = 0;
  int64_t parameters_per_gpu = 0;  // Ψ of the GPU
  double total() const { return parameters + gradients + optimizer_state + activations; }
};

// The busiest GPU: per category, the most any pipeline stage holds.
MemoryProjection project_memory(const ModelShape& model, const TrainingLayout& layout);

// Which blocks a pipeline stage holds; the embeddings are on stage 0, the head on the last.
struct StageShape {
  int stage = 0;
  int64_t blocks = 0;  // over all the stages the GPU holds
  // A GPU holding several stages (interleaved and V-shaped schedules) says which ends it holds
  // and how many micro-batches' activations of all its blocks it holds at its peak (its stages'
  // peak in flight over its stage count). Unset (-1): one stage, `stage`, under the layout's
  // schedule.
  int holds_first = -1;
  int holds_last = -1;
  double in_flight = -1;
};
// A GPU of pipeline stage `stage.stage`.
MemoryProjection project_stage_memory(const ModelShape& model, const TrainingLayout& layout,
                                      const StageShape& stage);

// What one micro-batch leaves saved for backward: per transformer block, and by the head (the
// final LayerNorm, the LM head and the loss), in bytes.
struct ActivationBytes {
  double per_block = 0, head = 0;
  // Of those, the bf16 weight copies autocast saves (0 unless weights are fp32 and compute bf16).
  double block_weight_copies = 0, head_weight_copies = 0;
};
ActivationBytes saved_activation_bytes(const ModelShape& model, const TrainingLayout& layout);

// Parameters of the model (same count as the engine's GPT).
int64_t model_parameters(const ModelShape& model);

// The model's parameters in the groups a data-parallel strategy gathers or reduces one at a
// time: the embeddings (token and position), one transformer block, and the head (the final
// LayerNorm, and the LM head unless it is tied). Tensor by tensor, elements each, whole (not
// split over a tensor group), in the order our GPT registers them (engine/model/gpt_model.cpp):
// buckets are whole tensors.
struct ParameterTensors {
  std::vector<int64_t> embeddings, block, head;
};
ParameterTensors parameter_tensor_sizes(const ModelShape& model);

}  // namespace shardscope::profiling
