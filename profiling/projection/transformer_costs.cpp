#include "profiling/projection/transformer_costs.h"

#include <algorithm>
#include <cmath>

#include "profiling/projection/collective_model.h"
#include "profiling/projection/gpu_compute_model.h"
#include "profiling/projection/moe_costs.h"
#include "profiling/projection/priced_pass.h"
#include "profiling/projection/ring_attention_costs.h"

namespace shardscope::profiling {
namespace {

using namespace priced;  // NOLINT: this file builds passes

constexpr int kBlockWeights = 4;  // qkv, attention projection, fc, MLP projection

// Entering and leaving a tensor-parallel region: without sequence parallelism, an all_reduce of
// the activations leaving it (forward) and entering it (backward); with it, an all_gather on the
// way in and a reduce_scatter on the way out, in both directions. What enters is a LayerNorm's
// output in fp32 (autocast casts it inside the region), so the way in moves fp32 both ways (the
// input's gradient comes back in fp32 too); what leaves is a row-parallel Linear's bf16 output.
// As a tp run here records them (ProjectionCheck.TensorCollectivesAreWhatARunRecords).
void enter_region(Pass& pass, const PassShape& s, bool backward) {
  const double bytes = double(pass_tokens(s)) * s.model.d_model * kResidual;
  if (s.sequence_parallel) {
    pass.collective(backward ? "reduce_scatter (sp)" : "all_gather (sp)",
                    backward ? "reduce_scatter_tensor" : "all_gather_into", bytes, s.tp);
  } else if (backward) {
    pass.collective("all_reduce (tp)", "all_reduce", bytes, s.tp);
  }
}
void leave_region(Pass& pass, const PassShape& s, bool backward) {
  const double bytes = double(pass_tokens(s)) * s.model.d_model * pass.compute_bytes();
  if (s.sequence_parallel) {
    pass.collective(backward ? "all_gather (sp)" : "reduce_scatter (sp)",
                    backward ? "all_gather_into" : "reduce_scatter_tensor", bytes, s.tp);
  } else if (!backward) {
    pass.collective("all_reduce (tp)", "all_reduce", bytes, s.tp);
  }
}

// Context parallelism's ring attention for this shape: its ring's neighbours talk over the cp
// group, whose ranks sit tp apart.
RingAttentionOps ring_of(const HardwareProfile& hw, const PassShape& s) {
  const ModelShape& m = s.model;
  return ring_attention_ops(hw, group_profile(hw, s.cp, s.tp), s.sequences * m.heads / s.tp, m.seq,
                            m.d_model / m.heads, s.cp);
}

// The block's attention with the kernel our GPT runs (engine/model/core_attention.cpp). SDPA is
// one flash kernel. Unfused, over BH = b a/t heads of s x s scores in the compute dtype: q scaled,
// q, k and v made contiguous for the batched matmuls, and the output transposed back (s d
// elements each, read and written); the scores q k^T (a batched GEMM), the causal mask filled in
// place and the softmax (each reading and writing the scores), and their product with v.
void attention_forward(Pass& pass, const PassShape& s) {
  const ModelShape& m = s.model;
  const int64_t bh = s.sequences * m.heads / s.tp, seq = m.seq, d = m.d_model / m.heads;
  if (s.cp > 1) return pass.append(ring_of(pass.hardware(), s).forward);
  if (!m.unfused_attention) return pass.attention("attention", bh, seq, d, false);
  const double head = double(bh) * seq * d * pass.compute_bytes(),
               scores = double(bh) * seq * seq * pass.compute_bytes();
  pass.memory("attention scale", 2 * head);
  pass.memory("attention layout", 4 * 2 * head);
  pass.memory("causal mask", 2.0 * seq * seq);
  pass.batched_matmul("scores", bh, seq, seq, d);
  pass.memory("mask fill", 2 * scores);
  pass.memory("softmax", 2 * scores);
  pass.batched_matmul("scores x v", bh, seq, d, seq);
}

// Its backward: unfused, the output's gradient made contiguous and q's, k's and v's made the
// qkv output's layout again (four copies of s d elements a head), the gradients of the softmax
// (its output and gradient read, the scores' written), of the mask (read and written) and of the
// scale, and four batched GEMMs: of the probabilities and v, then of q and k.
void attention_backward(Pass& pass, const PassShape& s) {
  const ModelShape& m = s.model;
  const int64_t bh = s.sequences * m.heads / s.tp, seq = m.seq, d = m.d_model / m.heads;
  if (s.cp > 1) return pass.append(ring_of(pass.hardware(), s).backward);
  if (!m.unfused_attention) return pass.attention("attention grad", bh, seq, d, true);
  const double head = double(bh) * seq * d * pass.compute_bytes(),
               scores = double(bh) * seq * seq * pass.compute_bytes();
  pass.memory("attention layout grad", 4 * 2 * head);
  pass.batched_matmul("probs grad", bh, seq, seq, d);
  pass.batched_matmul("v grad", bh, seq, d, seq);
  pass.memory("softmax grad", 3 * scores);
  pass.memory("mask fill grad", 2 * scores);
  pass.batched_matmul("q grad", bh, seq, d, seq);
  pass.batched_matmul("k grad", bh, seq, d, seq);
  pass.memory("attention scale grad", 2 * head);
}

// Autocast casts each of the block's fp32 weights to bf16: read 4 bytes, write 2.
// (A mixture's experts cast theirs in moe_ops.)
void weight_casts(Pass& pass, const PassShape& s) {
  if (s.fp32) return;  // no autocast: nothing cast
  const double h = double(s.model.d_model);
  const double mlp = s.model.experts > 0 ? 0 : 2 * s.model.mlp_ratio;
  pass.memory("weight casts", 6.0 * (4 + mlp) * h * h / s.tp);
}

// A mixture of experts in the block's MLP's place: its ranks, under the `ep` strategy, are the
// expert-parallel group (adjacent ranks).
MoeShape moe_shape(const PassShape& s) {
  return {s.model.experts, s.model.top_k, s.ep};
}
PassOps moe_of(const HardwareProfile& hw, const PassShape& s) {
  const ModelShape& m = s.model;
  return moe_ops(moe_shape(s), pass_tokens(s), m.d_model, m.mlp_ratio * m.d_model, hw,
                 group_profile(hw, std::max(1, s.ep), 1));
}

void block_forward(Pass& pass, const PassShape& s) {
  const ModelShape& m = s.model;
  const int64_t tokens = pass_tokens(s), h = m.d_model, t = s.tp;
  const int64_t local = s.sequence_parallel ? tokens / t : tokens;  // rows outside the regions
  if (!s.weight_casts_per_step) weight_casts(pass, s);
  for (int sub = 0; sub < 2; ++sub) {
    pass.memory(sub == 0 ? "ln1" : "ln2", double(local) * h * (kResidual + pass.compute_bytes()));
    enter_region(pass, s, false);
    if (sub == 0) {
      Linear{"qkv", tokens, h, 3 * h / t}.forward(pass);
      attention_forward(pass, s);
      Linear{"attn proj", tokens, h / t, h}.forward(pass);
    } else if (m.experts > 0) {
      pass.append(moe_of(pass.hardware(), s).forward);
    } else {
      Linear{"fc", tokens, h, m.mlp_ratio * h / t}.forward(pass);
      pass.memory("gelu", 2.0 * tokens * m.mlp_ratio * h / t * pass.compute_bytes());
      Linear{"mlp proj", tokens, m.mlp_ratio * h / t, h}.forward(pass);
    }
    leave_region(pass, s, false);
    pass.memory("residual add", double(local) * h * (2 * kResidual + pass.compute_bytes()));
  }
}

void block_backward_input(Pass& pass, const PassShape& s) {
  const ModelShape& m = s.model;
  const int64_t tokens = pass_tokens(s), h = m.d_model, t = s.tp;
  const int64_t local = s.sequence_parallel ? tokens / t : tokens;
  for (int sub = 1; sub >= 0; --sub) {
    pass.memory("residual grad", double(local) * h * 3 * kResidual);
    leave_region(pass, s, true);
    if (sub == 1 && m.experts > 0) {
      pass.append(moe_of(pass.hardware(), s).backward_input);
    } else if (sub == 1) {
      Linear{"mlp proj", tokens, m.mlp_ratio * h / t, h}.input_gradient(pass);
      pass.memory("gelu grad", 3.0 * tokens * m.mlp_ratio * h / t * pass.compute_bytes());
      Linear{"fc", tokens, h, m.mlp_ratio * h / t}.input_gradient(pass);
    } else {
      Linear{"attn proj", tokens, h / t, h}.input_gradient(pass);
      // Selective recompute runs the attention again when backward reaches it.
      if (m.selective_recompute && !s.activation_checkpointing) attention_forward(pass, s);
      attention_backward(pass, s);
      Linear{"qkv", tokens, h, 3 * h / t}.input_gradient(pass);
    }
    enter_region(pass, s, true);
    pass.memory(sub == 0 ? "ln1 grad" : "ln2 grad",
                double(local) * h * (2 * kResidual + pass.compute_bytes()));
  }
}

void block_backward_weight(Pass& pass, const PassShape& s) {
  const ModelShape& m = s.model;
  const int64_t tokens = pass_tokens(s), h = m.d_model, t = s.tp;
  if (m.experts > 0) {
    pass.append(moe_of(pass.hardware(), s).backward_weight);
  } else {
    Linear{"mlp proj", tokens, m.mlp_ratio * h / t, h}.weight_gradient(pass);
    Linear{"fc", tokens, h, m.mlp_ratio * h / t}.weight_gradient(pass);
  }
  Linear{"attn proj", tokens, h / t, h}.weight_gradient(pass);
  Linear{"qkv", tokens, h, 3 * h / t}.weight_gradient(pass);
  // Under sequence parallelism fc and qkv kept only their shard of the LayerNorm's output (in
  // the compute dtype) and gather it again for their weights' gradients. A whole backward starts
  // that gather before the input's gradient GEMM and waits for it after
  // (tp::sequence_parallel_linear, as Megatron), so the pair takes what the profile measured such
  // pairs take (pair_seconds): the gather's kernels take SMs and memory bandwidth from the GEMM,
  // and it from them. A split backward's weight pass has no such GEMM beside it, and a profile
  // that measured nothing prices the gather whole.
  if (s.sequence_parallel) {
    const double bytes = double(tokens) * h * pass.compute_bytes();
    const auto beside = [&](const Linear& linear) {  // its input gradient's GEMM, as priced
      return s.split_backward ? 0.0 : pass.gemm(linear.tokens, linear.in, linear.out);
    };
    pass.collective_beside_gemm("all_gather (sp, fc input again)", "all_gather_into", bytes, t,
                                beside(Linear{"fc", tokens, h, m.mlp_ratio * h / t}));
    pass.collective_beside_gemm("all_gather (sp, qkv input again)", "all_gather_into", bytes, t,
                                beside(Linear{"qkv", tokens, h, 3 * h / t}));
  }
  // fp32 weight gradients accumulated from the bf16 matmuls: read, add, write (a mixture: the
  // router's and the experts' this rank holds).
  const double mlp =
      m.experts > 0 ? double(moe_shape(s).local_experts()) * 2 * m.mlp_ratio + double(m.experts) / h
                    : 2.0 * m.mlp_ratio;
  pass.memory("grad accumulate", 3.0 * 4 * (4 + mlp) * h * h / t);
}

// A checkpointed block's forward runs without autograd recording it; its backward begins with
// the forward again, recorded.
void set_host_seconds(PassOps& ops, const HostOps& host, const HardwareProfile& hw,
                      bool checkpointed) {
  ops.forward_host_s = forward_host_seconds(host, hw.gpu, !checkpointed);
  ops.backward_input_host_s = backward_input_host_seconds(host, hw.gpu) +
                              (checkpointed ? forward_host_seconds(host, hw.gpu) : 0);
  ops.backward_weight_host_s = backward_weight_host_seconds(host, hw.gpu);
}

}  // namespace

int64_t pass_tokens(const PassShape& shape) {
  return shape.sequences * shape.model.seq / std::max(1, shape.cp);
}

double total_seconds(const std::vector<PricedOp>& ops) {
  double s = 0;
  for (const auto& op : ops) s += op.seconds;
  return s;
}

double total_seconds(const std::vector<PricedOp>& ops, PricedOp::Kind kind) {
  double s = 0;
  for (const auto& op : ops) s += op.kind == kind ? op.seconds : 0;
  return s;
}

PassOps block_ops(const PassShape& shape, const HardwareProfile& hw,
                  const HardwareProfile& tensor_group) {
  PassOps ops;
  Pass forward(hw, tensor_group, ops.forward, shape.fp32);
  block_forward(forward, shape);
  Pass input(hw, tensor_group, ops.backward_input, shape.fp32);
  if (shape.activation_checkpointing) block_forward(input, shape);  // recomputed first
  block_backward_input(input, shape);
  Pass weight(hw, tensor_group, ops.backward_weight, shape.fp32);
  block_backward_weight(weight, shape);
  const bool autocast = !shape.fp32;
  HostOps host = block_host_ops(autocast, shape.model.unfused_attention);
  if (shape.model.experts > 0) {
    host -= dense_mlp_host_ops(autocast);
    host += moe_host_ops(moe_shape(shape), autocast);
  }
  if (shape.weight_casts_per_step) host.casts -= kBlockWeights;  // the stage's shared copies
  double ring_forward_s = 0, ring_backward_s = 0;
  if (shape.cp > 1) {
    // The ring stands where SDPA's operator and its node (two kernels) were.
    host.ops -= 1;
    host.nodes -= 1;
    host.node_kernels -= 2;
    const RingAttentionOps ring = ring_of(hw, shape);
    ring_forward_s = ring.forward_host_s;
    ring_backward_s = ring.backward_host_s;
  }
  set_host_seconds(ops, host, hw, shape.activation_checkpointing);
  ops.forward_host_s += ring_forward_s;
  ops.backward_input_host_s +=
      ring_backward_s + (shape.activation_checkpointing ? ring_forward_s : 0);
  if (shape.model.selective_recompute && !shape.activation_checkpointing) {
    ops.backward_input_host_s +=
        shape.cp > 1
            ? ring_forward_s
            : forward_host_seconds(attention_host_ops(shape.model.unfused_attention), hw.gpu);
  }
  return ops;
}

PassOps weight_cast_ops(const PassShape& shape, const HardwareProfile& hw, bool head) {
  PassOps ops;
  if (shape.fp32) return ops;  // nothing to cast
  Pass forward(hw, hw, ops.forward);
  HostOps host;
  if (head) {
    const double h = double(shape.model.d_model), vocab = double(shape.model.vocab) / shape.tp;
    forward.memory("lm head weight cast", 6.0 * vocab * h);
    host.casts = 1;
  } else {
    weight_casts(forward, shape);
    host.casts = kBlockWeights;
  }
  set_host_seconds(ops, host, hw, false);
  return ops;
}

PassOps embedding_ops(const PassShape& s, const HardwareProfile& hw,
                      const HardwareProfile& tensor_group) {
  PassOps ops;
  const int64_t tokens = pass_tokens(s), h = s.model.d_model;
  Pass forward(hw, tensor_group, ops.forward, s.fp32);
  // The tensor group shares its sequences: each rank's token ids and targets (int64) gathered.
  for (const char* what : {"all_gather (token ids)", "all_gather (targets)"})
    forward.collective(what, "all_gather_into", double(tokens) * 8, s.tp);
  HostOps host = embedding_host_ops(!s.fp32);
  if (s.cp > 1) {
    // A context group shares its sequences too: gathered whole, then each rank's zig-zag
    // positions picked (index_select x2, and no arange: the positions are the rank's own).
    Pass ring(hw, group_profile(hw, s.cp, s.tp), ops.forward, s.fp32);
    for (const char* what : {"all_gather (token ids, cp)", "all_gather (targets, cp)"})
      ring.collective(what, "all_gather_into", double(s.sequences) * s.model.seq * 8, s.cp);
    host.ops += 2 + 2 - 1;  // the gathers' outputs, index_select x2; no arange
  }
  // Token and position rows gathered and added (fp32), then the vocabulary-parallel sum.
  forward.memory("embedding", double(tokens) * h * 3 * kResidual);
  if (s.sequence_parallel) {
    forward.collective("reduce_scatter (embedding)", "reduce_scatter_tensor",
                       double(tokens) * h * kResidual, s.tp);
  } else {
    forward.collective("all_reduce (embedding)", "all_reduce", double(tokens) * h * kResidual,
                       s.tp);
  }
  Pass weight(hw, tensor_group, ops.backward_weight, s.fp32);
  if (s.sequence_parallel) {
    weight.collective("all_gather (embedding)", "all_gather_into", double(tokens) * h * kResidual,
                      s.tp);
  }
  weight.memory("embedding grad", double(tokens) * h * 3 * kResidual);
  set_host_seconds(ops, host, hw, false);
  return ops;
}

PassOps head_ops(const PassShape& s, const HardwareProfile& hw,
                 const HardwareProfile& tensor_group) {
  PassOps ops;
  const int64_t tokens = pass_tokens(s), h = s.model.d_model, t = s.tp;
  const int64_t vocab = s.model.vocab / t;
  const int64_t local = s.sequence_parallel ? tokens / t : tokens;
  const Linear lm_head{"lm head", tokens, h, vocab};
  const double logits = double(tokens) * vocab;
  Pass forward(hw, tensor_group, ops.forward, s.fp32);
  forward.memory("ln_f", double(local) * h * (kResidual + forward.compute_bytes()));
  if (s.sequence_parallel)
    forward.collective("all_gather (sp)", "all_gather_into", double(tokens) * h * kResidual, t);
  lm_head.forward(forward);
  // fp32 loss over the vocabulary shard: upcast, max, exp and sum, log-softmax saved.
  // (In fp32 the upcast is no copy: one fp32 pass fewer.)
  const double upcast = s.fp32 ? 0 : 4;
  forward.memory("cross entropy", logits * (forward.compute_bytes() + upcast + 2 * 4));
  // The vocabulary-parallel loss: each token's max logit, sum of exponentials and target logit,
  // one fp32 all_reduce each.
  for (const char* what :
       {"all_reduce (loss max)", "all_reduce (loss sum)", "all_reduce (loss target)"})
    forward.collective(what, "all_reduce", double(tokens) * 4, t);
  Pass input(hw, tensor_group, ops.backward_input, s.fp32);
  input.memory("cross entropy grad", logits * (2 * 4 + (s.fp32 ? 0 : input.compute_bytes())));
  lm_head.input_gradient(input);
  if (s.sequence_parallel) {
    input.collective("reduce_scatter (sp)", "reduce_scatter_tensor", double(tokens) * h * kResidual,
                     t);
  } else {
    input.collective("all_reduce (tp)", "all_reduce", double(tokens) * h * kResidual, t);
  }
  input.memory("ln_f grad", double(local) * h * (2 * kResidual + input.compute_bytes()));
  Pass weight(hw, tensor_group, ops.backward_weight, s.fp32);
  lm_head.weight_gradient(weight);
  HostOps host = head_host_ops(!s.fp32, s.model.tie_embeddings);
  if (s.cp > 1) host.ops += 1;                   // the summed loss scaled to the replica's mean
  if (s.weight_casts_per_step) host.casts -= 1;  // the weight's shared copy; ln_f's output stays
  set_host_seconds(ops, host, hw, false);
  return ops;
}

HardwareProfile group_profile(const HardwareProfile& hw, int size, int stride) {
  HardwareProfile group = hw;
  const int per_node = std::max(1, std::min(size, hw.gpus_per_node / std::max(1, stride)));
  group.gpus_per_node = per_node;
  group.nodes = (size + per_node - 1) / per_node;
  return group;
}

double sequence_parallel_gradient_bytes(const ModelShape& model) {
  // Per block: two LayerNorms (weight, bias) and the two row-parallel Linears' biases; the final
  // LayerNorm; the position embedding.
  return 4.0 * (6.0 * model.d_model * model.layers + 2.0 * model.d_model +
                double(model.seq) * model.d_model);
}

double optimizer_seconds(const HardwareProfile& hw, double parameters, double tensors) {
  // mul_ (decay), mul_ add_ (first moment), mul_ addcmul_ (second), sqrt div add_ (denominator),
  // addcdiv_ (update): torch::optim::AdamW's step, one parameter at a time.
  const GpuCompute::HostCosts costs = hw.gpu.host_costs();
  const double per_tensor =
      costs.adamw_tensor_us > 0 ? costs.adamw_tensor_us : kAdamWKernelsPerTensor * costs.op_us;
  const double host = tensors * per_tensor * 1e-6;
  return std::max(memory_seconds(hw.gpu, 30.0 * parameters), host);
}

double rank_optimizer_seconds(const HardwareProfile& hw, const TrainingLayout& layout,
                              double parameters, double tensors) {
  const double shards = layout.zero != kZeroStages[0] ? std::max(1, layout.dp) : 1;
  return optimizer_seconds(hw, parameters / shards, tensors / shards);
}

double clip_seconds(const HardwareProfile& hw, double parameters, double tensors, bool in_fp64) {
  const double op = hw.gpu.host_costs().op_us * 1e-6;
  if (in_fp64) {
    // to(double), pow, sum and the copy to the host wait for each other, tensor by tensor; then
    // every gradient is read and written once more by its scaling, an operator a tensor.
    return memory_seconds(hw.gpu, (4.0 + 8 + 8 + 8 + 8) * parameters) + 4 * tensors * op +
           std::max(memory_seconds(hw.gpu, 8.0 * parameters), tensors * op);
  }
  // A norm a tensor, their stack, its norm and the coefficient (five), and a scaling a tensor,
  // with no wait between them.
  return std::max(memory_seconds(hw.gpu, 12.0 * parameters), (2 * tensors + 5) * op);
}

int64_t parameter_tensors(const ModelShape& model, int ep) {
  // A mixture: the router's weight and each expert's four in the MLP's four's place, of which an
  // expert-parallel rank holds its 1/ep.
  const int64_t experts = model.experts / std::max(1, ep);
  const int64_t mlp = model.experts > 0 ? 1 + 4 * experts : 4;
  return (8 + mlp) * model.layers + 4 + (model.tie_embeddings ? 0 : 1);
}

double host_or_device_seconds(const std::vector<PricedOp>& ops, double host_s) {
  return std::max(total_seconds(ops), host_s);
}

KernelShare kernel_share(const PassOps& p) {
  const auto share = [](double kernels, double time) {
    return time > 0 ? std::min(1.0, kernels / time) : 1.0;  // no pass: nothing to contend
  };
  return {share(total_seconds(p.forward), host_or_device_seconds(p.forward, p.forward_host_s)),
          share(total_seconds(p.backward_input) + total_seconds(p.backward_weight),
                host_or_device_seconds(p.backward_input, p.backward_input_host_s) +
                    host_or_device_seconds(p.backward_weight, p.backward_weight_host_s))};
}

}  // namespace shardscope::profiling
