#include "profiling/memory_projection.h"

#include <algorithm>
#include <stdexcept>

namespace shardscope::profiling {
namespace {

struct Counts {
  int64_t sharded = 0;     // split across the tensor group
  int64_t replicated = 0;  // whole on every tensor rank
  Counts operator+(const Counts& o) const {
    return {sharded + o.sharded, replicated + o.replicated};
  }
  Counts operator*(int64_t n) const { return {sharded * n, replicated * n}; }
};

// The token embedding is split by vocabulary rows, the position embedding replicated; the head
// is the final LayerNorm (replicated) and the LM head (split, absent when tied).
Counts embedding_counts(const ModelShape& m) {
  return {m.vocab * m.d_model, m.seq * m.d_model};
}
Counts head_counts(const ModelShape& m) {
  return {m.tie_embeddings ? 0 : m.vocab * m.d_model, 2 * m.d_model};
}

// Per block: qkv, attention projection, MLP weights and column biases are split; both
// LayerNorms and the two row-parallel biases are replicated.
Counts block_counts(const ModelShape& m) {
  const int64_t d = m.d_model, hidden = d * m.mlp_ratio;
  return {d * 3 * d + 3 * d + d * d + d * hidden + hidden + hidden * d, 2 * d + 2 * d + d + d};
}

}  // namespace

int64_t model_parameters(const ModelShape& m) {
  const Counts all = embedding_counts(m) + block_counts(m) * m.layers + head_counts(m);
  return all.sharded + all.replicated;
}

MemoryProjection project_memory(const ModelShape& m, const TrainingLayout& l) {
  if (l.dp < 1 || l.tp < 1 || l.pp < 1 || l.micro_batch < 1 || l.micro_batches < 1)
    throw std::invalid_argument("degrees and batch sizes must be positive");
  if (l.pp > m.layers) throw std::invalid_argument("more pipeline stages than layers");
  const double t = l.tp, d = l.dp;
  // The busiest stage: the blocks split as evenly as possible, embeddings on the first stage
  // and the head on the last (or both on the only one).
  const int64_t blocks = (m.layers + l.pp - 1) / l.pp;
  const Counts stage_blocks = block_counts(m) * blocks;
  const Counts first = l.pp == 1 ? embedding_counts(m) + stage_blocks + head_counts(m)
                                 : embedding_counts(m) + stage_blocks;
  const Counts last = l.pp == 1 ? first : stage_blocks + head_counts(m);
  auto per_gpu = [&](const Counts& c) {
    return static_cast<int64_t>(static_cast<double>(c.sharded) / t + c.replicated);
  };
  MemoryProjection out;
  out.parameters_per_gpu = std::max(per_gpu(first), per_gpu(last));
  const double psi = static_cast<double>(out.parameters_per_gpu);
  const double param_bytes = l.mixed_precision ? 2 : 4, grad_bytes = param_bytes;
  const double optimizer_bytes = l.mixed_precision ? 12 : 8;
  const bool z1 = l.zero != "ddp", z2 = l.zero == "zero2" || l.zero == "zero3",
             z3 = l.zero == "zero3";
  if (l.zero != "ddp" && l.zero != "zero1" && l.zero != "zero2" && l.zero != "zero3")
    throw std::invalid_argument("unknown ZeRO stage '" + l.zero + "' (ddp, zero1, zero2, zero3)");
  out.parameters = param_bytes * psi / (z3 ? d : 1);
  out.gradients = grad_bytes * psi / (z2 ? d : 1);
  out.optimizer_state = optimizer_bytes * psi / (z1 ? d : 1);

  const double s = m.seq, b = l.micro_batch, h = m.d_model, a = m.heads;
  double per_layer = 0;
  if (l.activation_checkpointing) {
    per_layer = 2 * s * b * h;
  } else if (l.sequence_parallel && l.tp > 1) {
    per_layer = s * b * h / t * (34 + 5 * a * s / h);
  } else if (l.tp > 1) {
    per_layer = s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
  } else {
    per_layer = s * b * h * (34 + 5 * a * s / h);
  }
  const double in_flight =
      l.pp == 1 ? 1 : (l.schedule == "gpipe" ? l.micro_batches : std::min(l.pp, l.micro_batches));
  // The last stage also holds one micro-batch's fp32 logits; the first holds the most
  // micro-batches. The busier of the two.
  const double logits = 4 * s * b * m.vocab / t;
  const double first_stage = per_layer * blocks * in_flight + (l.pp == 1 ? logits : 0);
  const double last_stage = per_layer * blocks * 1 + logits;
  out.activations = std::max(first_stage, l.pp == 1 ? first_stage : last_stage);
  return out;
}

}  // namespace shardscope::profiling
