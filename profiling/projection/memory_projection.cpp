#include "profiling/projection/memory_projection.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

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
// A mixture of experts has `experts` MLPs and a router (d x E, no bias) in place of the MLP.
// `ep`: the experts are spread over that many GPUs (a GPU's own share).
Counts block_counts(const ModelShape& m, int ep = 1) {
  const int64_t d = m.d_model, hidden = d * m.mlp_ratio;
  const int64_t mlps = m.experts > 0 ? m.experts / ep : 1, router = d * m.experts;
  return {d * 3 * d + 3 * d + d * d + mlps * (d * hidden + hidden + hidden * d) + router,
          2 * d + 2 * d + d + mlps * d};
}

// The parameters ZeRO-3 holds gathered at its peak: a unit, or with prefetch the largest two
// adjacent ones in forward order (embeddings, blocks, head). Tied, the head computes with the
// embeddings' unit, gathered again, and keeps it from the head's backward to the embeddings':
// through backward it is held beside a block (two with prefetch).
double gathered_at_once(const ModelShape& m, const TrainingLayout& l) {
  const auto whole = [](const Counts& c) { return double(c.sharded + c.replicated); };
  const double head = whole(head_counts(m)), block = whole(block_counts(m, std::max(1, l.ep)));
  const double embeddings = whole(embedding_counts(m)) + (m.tie_embeddings ? head : 0);
  std::vector<double> units = {embeddings};
  for (int64_t b = 0; b < m.layers; ++b) units.push_back(block);
  units.push_back(m.tie_embeddings ? embeddings : head);
  double most = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    const double next = l.prefetch && u + 1 < units.size() ? units[u + 1] : 0;
    most = std::max(most, units[u] + next);
  }
  if (m.tie_embeddings && m.layers > 0)
    most = std::max(most, embeddings + (l.prefetch && m.layers > 1 ? 2 : 1) * block);
  return most;
}

}  // namespace

int64_t model_parameters(const ModelShape& m) {
  const Counts all = embedding_counts(m) + block_counts(m) * m.layers + head_counts(m);
  return all.sharded + all.replicated;
}

ParameterTensors parameter_tensor_sizes(const ModelShape& m) {
  const int64_t h = m.d_model, hidden = h * m.mlp_ratio;
  ParameterTensors t;
  t.embeddings = {m.vocab * h, m.seq * h};
  // ln1, attention (qkv, projection), ln2, then the MLP (fc, projection) or the mixture (its
  // router, without bias, and each expert's MLP).
  t.block = {h, h, 3 * h * h, 3 * h, h * h, h, h, h};
  const std::vector<int64_t> mlp = {hidden * h, hidden, h * hidden, h};
  if (m.experts > 0) {
    t.block.push_back(m.experts * h);
    for (int64_t e = 0; e < m.experts; ++e) t.block.insert(t.block.end(), mlp.begin(), mlp.end());
  } else {
    t.block.insert(t.block.end(), mlp.begin(), mlp.end());
  }
  t.head = {h, h};
  if (!m.tie_embeddings) t.head.push_back(m.vocab * h);
  return t;
}

// What our GPT (engine/model/gpt_model.cpp) saves for backward, per micro-batch of b sequences of s
// tokens, width h, a heads, MLP width r*h, vocabulary V; c = bytes of a compute element, R = bytes
// of the residual stream (fp32 under autocast: the residual adds promote to the fp32 input).
// Checked tensor by tensor with torch.autograd.graph.saved_tensors_hooks on the same block.
// Per block, in units of sbh elements:
//   ln1 saves its input x (R) and ln1's output as the qkv Linear's input (c, cast by autocast);
//   SDPA (flash kernels on CPU and GPU: no s x s matrix) saves q, k, v, views of the qkv output
//   (3c), and its output (c), which is also the attention projection's input (the transpose
//   back is already contiguous, so the copy is a no-op); ln2 saves the residual h (R) and its
//   output as fc's input (c); GELU saves fc's output (r c), the MLP projection GELU's output
//   (r c). Total sbh (2R + c (6 + 2r)): 64 bytes in fp32 (r = 4), 36 in bf16 autocast.
//   Small terms: two LayerNorms' mean and rstd (fp32, 16 sb bytes), SDPA's logsumexp
//   (fp32, 4 abs bytes).
//   bf16 autocast with fp32 weights: each Linear saves the bf16 copy of its weight,
//   c (4 + 2r) h^2 bytes per block (biases are not saved).
// Head: ln_f saves its input (R sbh) and its output as the LM head's input (c sbh) plus 8 sb of
// statistics; the loss is computed in fp32 and log-softmax saves its output (4 sbV); autocast
// adds the LM head's weight copy (c Vh).
// Unfused attention (engine/model/core_attention.cpp) saves q (scaled), k and v as the batched
// matmuls' contiguous copies (3c, as SDPA's views) and the softmax's output, c a s^2 b, instead
// of the logsumexp; with selective recompute the attention keeps only its input, the qkv output
// (3c), and the projection its output (c), neither kernel's own.
// With activation checkpointing each block keeps only its input (R sbh) and recomputes the rest
// in backward (in no-grad forward: no weight copies either); the head is not checkpointed.
// A mixture of experts (E experts, each token to k of them) saves, instead of the MLP's fc and
// GELU outputs (2r c sbh), per routed token the expert's input, fc and GELU outputs and output
// (k (2 + 2r) c sbh), and per token the router's probabilities (4E), the top-k indices and
// weights and the routing's index tensors (4 + 32k bytes); autocast copies every expert's
// weights and the router's.
// Tensor parallelism over t: the column/row-parallel tensors (qkv, attention output, fc, GELU,
// the weight copies, heads' logsumexp, vocabulary-parallel logits) divide by t; sequence
// parallelism divides the LayerNorms' inputs and statistics by t as well, and their outputs:
// the column-parallel Linear after each keeps only its shard of them, in the compute dtype, and
// gathers it again in backward (tp::sequence_parallel_linear, as Megatron's does). The final
// LayerNorm's output, gathered for the LM head, is saved whole.
// (Korthikanti et al.'s sbh(34 + 5as/h) is for Megatron's block: 16-bit, dropout masks and a
// materialised s x s softmax; ours has none of those, so it under-counted fp32 by 1.5-1.8x.)
ActivationBytes saved_activation_bytes(const ModelShape& m, const TrainingLayout& l) {
  const double c = l.compute_bytes > 0 ? l.compute_bytes : (l.mixed_precision ? 2 : 4);
  const double R = l.mixed_precision ? c : 4;
  const bool weight_copies = c < 4 && !l.mixed_precision;
  const double s = double(m.seq) / std::max(1, l.cp), b = l.micro_batch, h = m.d_model;
  const double a = m.heads, V = m.vocab;
  const double r = m.mlp_ratio, t = l.tp;
  const double sp = l.sequence_parallel && l.tp > 1 ? t : 1;
  ActivationBytes out;
  if (l.activation_checkpointing) {
    out.per_block = s * b * h * R / sp;
  } else {
    // The LayerNorms' inputs and statistics, then their outputs as qkv's and fc's inputs.
    const double replicated = s * b * h * 2 * R + 16 * s * b;
    const double gathered = s * b * h * 2 * c / sp;
    const double E = double(m.experts), k = double(m.top_k);
    const double mlp = E > 0 ? s * b * h * c * k * (2 + 2 * r) + s * b * (4 * E + 4 + 32 * k)
                             : s * b * h * c * 2 * r;
    // The attention's own: SDPA's logsumexp (fp32, a s b); unfused, the softmax's output (c a s^2
    // b, which its product with v saves too); with selective recompute, nothing.
    const double attention =
        m.selective_recompute ? 0 : (m.unfused_attention ? c * a * s * s * b : 4 * a * s * b);
    const double split = s * b * h * c * 4 + mlp + attention;
    out.per_block = replicated / sp + gathered + split / t;
    const double held_experts = std::max(E / std::max(1, l.ep), 1.0);
    if (weight_copies)
      out.block_weight_copies = c * (4 + 2 * r * held_experts) * h * h / t + c * E * h;
    out.per_block += out.block_weight_copies;
  }
  out.head = (s * b * h * R + 8 * s * b) / sp + s * b * h * c + 4 * s * b * V / t;
  if (weight_copies) out.head_weight_copies = c * V * h / t;  // the LM head's (or tied embedding's)
  out.head += out.head_weight_copies;
  return out;
}

int zero_stage_of(const std::string& zero) {
  for (int stage = 0; stage < 4; ++stage) {
    if (zero == kZeroStages[stage]) return stage;
  }
  return -1;
}

MemoryProjection project_stage_memory(const ModelShape& m, const TrainingLayout& l,
                                      const StageShape& stage) {
  if (l.dp < 1 || l.tp < 1 || l.pp < 1 || l.cp < 1 || l.ep < 1 || l.micro_batch < 1 ||
      l.micro_batches < 1)
    throw std::invalid_argument("degrees and batch sizes must be positive");
  if (l.pp > m.layers) throw std::invalid_argument("more pipeline stages than layers");
  const int zero = zero_stage_of(l.zero);
  if (zero < 0)
    throw std::invalid_argument("unknown ZeRO stage '" + l.zero + "' (ddp, zero1, zero2, zero3)");
  const bool first = stage.holds_first >= 0 ? stage.holds_first != 0 : stage.stage == 0;
  const bool last = stage.holds_last >= 0 ? stage.holds_last != 0 : stage.stage == l.pp - 1;
  Counts held = block_counts(m, std::max(1, l.ep)) * stage.blocks;
  if (first) held = held + embedding_counts(m);
  if (last) held = held + head_counts(m);
  const double t = l.tp, d = l.dp;
  MemoryProjection out;
  out.parameters_per_gpu =
      static_cast<int64_t>(static_cast<double>(held.sharded) / t + held.replicated);
  const double psi = static_cast<double>(out.parameters_per_gpu);
  const double param_bytes = l.mixed_precision ? 2 : 4, grad_bytes = param_bytes;
  const double optimizer_bytes = l.mixed_precision ? 12 : 8;
  const bool z1 = zero >= 1, z2 = zero >= 2, z3 = zero >= 3;
  out.parameters = param_bytes * psi / (z3 ? d : 1);
  if (z3) out.parameters += param_bytes * gathered_at_once(m, l) / t;
  out.gradients = grad_bytes * psi / (z2 ? d : 1);
  out.optimizer_state = optimizer_bytes * psi / (z1 ? d : 1);

  // Micro-batches whose activations a stage holds at once: GPipe runs every forward before any
  // backward; 1F1B's stage s warms up with p - s forwards, then frees one per one it adds.
  const double in_flight =
      stage.in_flight >= 0 ? stage.in_flight
      : l.pp == 1          ? 1
                           : (l.schedule == "gpipe" ? l.micro_batches
                                                    : std::min(l.pp - stage.stage, l.micro_batches));
  const ActivationBytes saved = saved_activation_bytes(m, l);
  // The embeddings save only the positions (int64).
  const double embed = first ? 8.0 * m.seq : 0;
  const double per_micro_batch = saved.per_block * stage.blocks + (last ? saved.head : 0) + embed;
  // Weight copies shared by the step's micro-batches are held once, however many are in flight.
  const double shared = l.weight_casts_per_step ? saved.block_weight_copies * stage.blocks +
                                                      (last ? saved.head_weight_copies : 0)
                                                : 0;
  out.activations = in_flight * (per_micro_batch - shared) + shared;
  return out;
}

MemoryProjection project_memory(const ModelShape& m, const TrainingLayout& l) {
  if (l.pp < 1) throw std::invalid_argument("degrees and batch sizes must be positive");
  if (l.pp > m.layers) throw std::invalid_argument("more pipeline stages than layers");
  // Without the engine's cut, every stage is given the most blocks any stage can have
  // (ceil(layers / p)), and each category is the most any stage holds: a bound for the busiest
  // GPU, as a hardware plan needs it.
  const int64_t blocks = (m.layers + l.pp - 1) / l.pp;
  MemoryProjection busiest;
  for (int s = 0; s < l.pp; ++s) {
    const MemoryProjection p = project_stage_memory(m, l, {s, blocks});
    busiest.parameters = std::max(busiest.parameters, p.parameters);
    busiest.gradients = std::max(busiest.gradients, p.gradients);
    busiest.optimizer_state = std::max(busiest.optimizer_state, p.optimizer_state);
    busiest.activations = std::max(busiest.activations, p.activations);
    busiest.parameters_per_gpu = std::max(busiest.parameters_per_gpu, p.parameters_per_gpu);
  }
  return busiest;
}

}  // namespace shardscope::profiling
