#pragma once

#include <cstdint>
#include <string>

namespace shardscope::profiling {

// A GPT's shape, as the projection needs it (profiling does not depend on the engine's config).
struct ModelShape {
  int64_t vocab = 0, d_model = 0, heads = 0, layers = 0, seq = 0, mlp_ratio = 4;
  bool tie_embeddings = false;
};

// How the model is laid out over GPUs and trained.
struct TrainingLayout {
  std::string zero = "ddp";  // ddp | zero1 | zero2 | zero3 (sharding over the dp dimension)
  int dp = 1, tp = 1, pp = 1;
  int micro_batch = 1;    // sequences per (pipeline) micro-batch
  int micro_batches = 1;  // pipeline micro-batches per step
  std::string schedule = "1f1b";
  bool mixed_precision = true;  // bf16 weights and gradients, fp32 master + Adam: K = 12
  bool sequence_parallel = false;
  bool activation_checkpointing = false;
};

// Bytes per GPU on the busiest GPU (the pipeline stage holding the most), by category, from the
// formulas in DESIGN.md: parameters and gradients 2Ψ each and optimizer state 12Ψ in mixed
// precision (4Ψ, 4Ψ, 8Ψ in fp32 with Adam), Ψ being the GPU's own parameters (tensor shards plus
// the parameters replicated across the tensor group); ZeRO-1/2/3 divide optimizer state, then
// gradients, then parameters by dp. Activations per layer after Korthikanti et al.:
// sbh(34 + 5as/h) bytes, sbh(10 + 24/t + 5as/(ht)) with tensor parallelism, (sbh/t)(34 + 5as/h)
// with sequence parallelism as well, 2sbh with full recomputation; times the micro-batches a
// stage holds (1F1B: min(p, m) on the first stage, GPipe: m), plus the fp32 logits (4sbV/t).
struct MemoryProjection {
  double parameters = 0, gradients = 0, optimizer_state = 0, activations = 0;
  int64_t parameters_per_gpu = 0;  // Ψ of the busiest GPU
  double total() const { return parameters + gradients + optimizer_state + activations; }
};

MemoryProjection project_memory(const ModelShape& model, const TrainingLayout& layout);

// Parameters of the model (same count as the engine's GPT).
int64_t model_parameters(const ModelShape& model);

}  // namespace shardscope::profiling
