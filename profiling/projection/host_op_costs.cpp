// What the host dispatches for our GPT's passes (profiling::HostOps), counted from a real step,
// and what that costs at a GPU's measured host costs: transformer_costs.h declares these.
#include "profiling/projection/transformer_costs.h"

namespace shardscope::profiling {

// Counted from a step of our GPT (perf --only host-ops prints each name with its count). The
// kernels each node launches on a GPU: none for view nodes (View, T, Transpose, UnsafeView,
// Unsqueeze), AccumulateGrad (zero_grad leaves no gradient, so the first is taken as it is) and a
// residual add's; one for Split's (a cat), a bias add's (its gradient summed over the tokens),
// ToCopy (autocast's casts), GELU and log-softmax; two for LayerNorm (input, then weight and
// bias), flash attention (its preprocessing, then the kernel) and NLL (zeros, then the scatter);
// four for an embedding's (sort, unique, sum, scatter); two matmuls for Mm, one each side.
HostOps attention_host_ops(bool unfused) {
  HostOps h;
  // reshape x3 (q, k, v into heads), transpose x4 (the same, and the output back), view, split;
  // SDPA. Unfused: k's transpose; matmul x2 (the scores, their product with v); mul (q scaled),
  // ones and triu (the mask), masked_fill_, softmax, and contiguous (the output transposed back is
  // a copy, where SDPA's flash layout made it a no-op).
  h.views = unfused ? 10 : 9;
  h.ops = unfused ? 6 : 1;
  h.matmuls = unfused ? 2 : 0;
  return h;
}

HostOps block_host_ops(bool autocast, bool unfused_attention) {
  HostOps h = attention_host_ops(unfused_attention);
  // The rest: t x4; matmul x4; add_ x4 (biases), add x2, layer_norm x2, gelu. Autocast casts the
  // four weights and the two LayerNorm outputs that enter a matmul.
  h.views += 4, h.matmuls += 4, h.ops += 9;
  h.casts = autocast ? 6 : 0;
  // AccumulateGrad x12, View x8, Add x6, Mm x4, T x4, Transpose x4, UnsafeView x4, LayerNorm x2,
  // Gelu, attention, Split; autocast: ToCopy x6.
  h.nodes = 47 + h.casts;
  h.node_kernels = 4 + 2 * 2 + 1 + 2 + 1 + h.casts;
  h.node_matmuls = 8;
  if (unfused_attention) {
    // Instead of SDPA's node (two kernels): Bmm x2 (two GEMMs each), the matmuls' Clone x4 (of q,
    // k, v and the output), Expand x4, ReshapeAlias x3, UnsafeView x5, Transpose, Mul, MaskedFill
    // and Softmax, and two View fewer. Kernels: the mul's, the mask's, the softmax's, and four
    // copies of gradients back into the qkv output's layout.
    h.nodes += 19;
    h.node_kernels += 7 - 2;
    h.node_matmuls += 4;
  }
  // The weights' side: AccumulateGrad x12, the biases' Add x4, T x4, the weights' ToCopy x4.
  h.weight_nodes = 12 + 4 + 4 + (autocast ? 4 : 0);
  h.weight_node_kernels = 4 + (autocast ? 4 : 0);
  h.weight_node_matmuls = 4;
  return h;
}

HostOps embedding_host_ops(bool) {
  HostOps h;
  h.views = 1, h.ops = 4;  // unsqueeze; embedding x2, arange, add
  // AccumulateGrad x2, Embedding x2, Unsqueeze, Add (the position rows summed over sequences):
  // all on the weights' side (token ids have no gradient).
  h.nodes = h.weight_nodes = 6;
  h.node_kernels = h.weight_node_kernels = 2 * 4 + 1;
  return h;
}

HostOps head_host_ops(bool autocast, bool tied_embeddings) {
  HostOps h;
  h.views = 3, h.ops = 3, h.matmuls = 1;  // t, view, reshape; layer_norm, to, cross_entropy
  h.casts = autocast ? 2 : 0;             // the head's weight and the final LayerNorm's output
  // AccumulateGrad x3 (x2 tied: the head's weight is the embedding's), View x2, Mm, T,
  // UnsafeView, LayerNorm, LogSoftmax, NllLoss; autocast: ToCopy x3 (the logits' `to` too).
  h.nodes = 11 - (tied_embeddings ? 1 : 0) + (autocast ? 3 : 0);
  h.node_kernels = 2 + 1 + 2 + (autocast ? 3 : 0);
  h.node_matmuls = 2;
  h.weight_nodes = 3 - (tied_embeddings ? 1 : 0) + 1 + (autocast ? 1 : 0);  // AccumulateGrad, T
  h.weight_node_kernels = autocast ? 1 : 0;
  h.weight_node_matmuls = 1;
  return h;
}

double forward_host_seconds(const HostOps& o, const GpuCompute& gpu, bool recording) {
  const auto c = gpu.host_costs();
  // A matmul and a cast are recorded as any operator is.
  const double op = recording ? c.autograd_op_us : c.op_us;
  const double record = op - c.op_us;
  return 1e-6 * (o.views * c.view_us + (o.ops + o.casts) * op + o.matmuls * (c.matmul_us + record));
}

namespace {

// node_us was measured with the one kernel its node launched: the node alone is the rest.
double backward_host_seconds(double nodes, double kernels, double matmuls, const GpuCompute& gpu) {
  const auto c = gpu.host_costs();
  return 1e-6 * (nodes * (c.node_us - c.op_us) + kernels * c.op_us + matmuls * c.mm_us);
}

}  // namespace

double backward_input_host_seconds(const HostOps& o, const GpuCompute& gpu) {
  return backward_host_seconds(o.nodes - o.weight_nodes, o.node_kernels - o.weight_node_kernels,
                               o.node_matmuls - o.weight_node_matmuls, gpu);
}

double backward_weight_host_seconds(const HostOps& o, const GpuCompute& gpu) {
  return backward_host_seconds(o.weight_nodes, o.weight_node_kernels, o.weight_node_matmuls, gpu);
}

}  // namespace shardscope::profiling
