#pragma once

#include <string>
#include <vector>

#include "profiling/projection/hardware_profile.h"
#include "profiling/projection/memory_projection.h"

namespace shardscope::profiling {

// One kernel or collective of a pass, priced on a GPU: what our GPT runs (engine/model), under
// a tensor-parallel layout (Megatron's column- and row-parallel Linears, optionally with
// sequence parallelism), in bf16 autocast: matmuls in bf16, the residual stream, LayerNorms and
// the loss in fp32.
struct PricedOp {
  std::string name;
  enum class Kind { kMatmul, kAttention, kMemory, kTensorComm } kind = Kind::kMatmul;
  double flops = 0;  // matmuls and attention
  double bytes = 0;  // HBM bytes (memory kernels) or a collective's buffer
  double seconds = 0;
  // A collective's c10d op as Comm records it (all_reduce, all_gather_into,
  // reduce_scatter_tensor); its `bytes` are the whole buffer (all_gather's output).
  std::string collective;
};

// What the host dispatches for a pass of our GPT (engine/model) in one micro-batch: the top-level
// ATen operators of its forward (views, which launch nothing, and matmuls apart from the rest),
// and the autograd nodes of its backward with the kernels they launch. perf's census
// (app/perf/op_census.h) counts the operators and nodes of a real step, and
// ProjectionCheck.HostOperatorsAreWhatAStepDispatches holds these counts to it; the kernels a
// node launches on a GPU are CUDA's, named with each count in the .cpp.
struct HostOps {
  double views = 0, ops = 0, matmuls = 0;  // forward, top level
  double casts = 0;  // forward: autocast's casts, called inside the matmuls (a ToCopy node each)
  double nodes = 0, node_kernels = 0, node_matmuls = 0;  // backward
  // The part of the backward on the weights' side (AccumulateGrad, a weight's transpose and cast,
  // a bias's sum, the weight-gradient matmuls): what a split backward's weight pass runs.
  double weight_nodes = 0, weight_node_kernels = 0, weight_node_matmuls = 0;
};
// Counts added or taken away (a mixture of experts in a block's MLP's place).
inline HostOps& operator+=(HostOps& a, const HostOps& b) {
  a.views += b.views, a.ops += b.ops, a.matmuls += b.matmuls, a.casts += b.casts;
  a.nodes += b.nodes, a.node_kernels += b.node_kernels, a.node_matmuls += b.node_matmuls;
  a.weight_nodes += b.weight_nodes, a.weight_node_kernels += b.weight_node_kernels;
  a.weight_node_matmuls += b.weight_node_matmuls;
  return a;
}
inline HostOps operator*(double times, HostOps h) {
  h.views *= times, h.ops *= times, h.matmuls *= times, h.casts *= times;
  h.nodes *= times, h.node_kernels *= times, h.node_matmuls *= times;
  h.weight_nodes *= times, h.weight_node_kernels *= times, h.weight_node_matmuls *= times;
  return h;
}
inline HostOps& operator-=(HostOps& a, const HostOps& b) {
  return a += -1.0 * b;
}

// One block; the embedding (token and position lookups, their sum); the head (final LayerNorm,
// LM head, cross-entropy). `autocast`: bf16 autocast (what a GPU projection prices), whose casts
// add a node each.
HostOps block_host_ops(bool autocast, bool unfused_attention = false);
// The part of a block's forward that is its attention (SDPA's, or unfused): what selective
// recompute dispatches again in backward.
HostOps attention_host_ops(bool unfused_attention);
HostOps embedding_host_ops(bool autocast);
HostOps head_host_ops(bool autocast, bool tied_embeddings);
// Host seconds of a forward (`recording`: autograd records it; a checkpointed block's first
// forward runs without), and of a backward's input and weight sides, at the GPU's measured host
// costs. A whole backward is both sides.
double forward_host_seconds(const HostOps& ops, const GpuCompute& gpu, bool recording = true);
double backward_input_host_seconds(const HostOps& ops, const GpuCompute& gpu);
double backward_weight_host_seconds(const HostOps& ops, const GpuCompute& gpu);

// The passes of one micro-batch on one GPU. A split backward's input pass is `backward_input`,
// its weight pass (the weight-gradient matmuls, which nobody waits for) `backward_weight`; a
// whole backward is both. With activation checkpointing `backward_input` begins with the
// recomputed forward.
struct PassOps {
  std::vector<PricedOp> forward, backward_input, backward_weight;
  // The host's time to dispatch each pass (HostOps at the GPU's host costs).
  double forward_host_s = 0, backward_input_host_s = 0, backward_weight_host_s = 0;
};

double total_seconds(const std::vector<PricedOp>& ops);
double total_seconds(const std::vector<PricedOp>& ops, PricedOp::Kind kind);
// The ops' time when the host takes `host_s` to dispatch them while the device runs those before
// it: the longer of the two (the queue between them is deep enough for a block).
double host_or_device_seconds(const std::vector<PricedOp>& ops, double host_s);
// Of the passes' time (each its kernels or its host's dispatch, the longer), the share their
// kernels fill, forward and backward (input and weight gradients) apart: below 1 where the host
// is the bound, and the GPU idles between kernels.
struct KernelShare {
  double forward = 1, backward = 1;
};
KernelShare kernel_share(const PassOps& passes);

// The model's shape and what one micro-batch of one GPU holds.
struct PassShape {
  ModelShape model;
  int64_t sequences = 1;  // per micro-batch, on each GPU of the tensor group
  int tp = 1;
  // Context parallelism: each sequence split over cp ranks (s / cp tokens on each), attention by
  // the ring (ring_attention_costs.h); `sequences` are then the replica's, which all cp ranks
  // share.
  int cp = 1;
  // Expert parallelism (a mixture's experts spread over ep ranks, tokens sent to them by
  // all_to_all, as the `ep` strategy does at any degree); 0: the experts run where the tokens are.
  int ep = 0;
  bool sequence_parallel = false;
  bool activation_checkpointing = false;
  // The schedule runs each backward's weight pass apart from its input pass (zero bubble): what
  // the weight pass waits for then has no input-gradient GEMM beside it to hide behind.
  bool split_backward = false;
  // The step's micro-batches share bf16 copies of the Linears' weights (our pipelines keep them
  // for the step): a forward finds them made, and weight_cast_ops prices making them, once a
  // step.
  bool weight_casts_per_step = false;
  // The run computes in fp32 (`--precision fp32`, no autocast): fp32 GEMMs and attention at the
  // GPU's measured fp32 rates (GpuCompute::prices_fp32), 4-byte activations, no weight casts
  // (and so no shared copies of them: weight_casts_per_step stays false).
  bool fp32 = false;
};

// The tokens of a micro-batch on one GPU: s / cp of each of its sequences.
int64_t pass_tokens(const PassShape& shape);

// One transformer block; the embedding (first stage) and the final LayerNorm, LM head and loss
// (last stage). `tensor_group` is the profile the tensor group's collectives run on.
PassOps block_ops(const PassShape& shape, const HardwareProfile& hw,
                  const HardwareProfile& tensor_group);
// The casts to bf16 of one block's four Linear weights (`head`: of the LM head's weight), forward
// only: in each forward unless the shape's micro-batches share them, and then once a step, in
// the stage's first forward.
PassOps weight_cast_ops(const PassShape& shape, const HardwareProfile& hw, bool head);
PassOps embedding_ops(const PassShape& shape, const HardwareProfile& hw,
                      const HardwareProfile& tensor_group);
PassOps head_ops(const PassShape& shape, const HardwareProfile& hw,
                 const HardwareProfile& tensor_group);

// The profile a group of `size` ranks, `stride` ranks apart, communicates over: as many of them
// share a node as fit in one, and the rest of the group is on other nodes.
HardwareProfile group_profile(const HardwareProfile& hw, int size, int stride);

// With sequence parallelism, the parameters every tensor rank holds whole but sees a part of the
// sequence through (LayerNorms, row-parallel biases, position embedding): their fp32 gradients
// are summed over the tensor group once a step, after backward. Bytes of that all_reduce.
double sequence_parallel_gradient_bytes(const ModelShape& model);

// The optimizer step over `parameters` fp32 master weights in `tensors` tensors (AdamW: weights,
// gradients and both moments read, weights and moments written, the bf16 copy written: 30 bytes
// a parameter), or, when longer, the host's dispatch of its kernels: LibTorch's AdamW runs
// kAdamWKernelsPerTensor of them per parameter tensor (the census counts them), each tensor at
// the GPU's measured adamw_tensor_us.
constexpr int kAdamWKernelsPerTensor = 9;
double optimizer_seconds(const HardwareProfile& hw, double parameters, double tensors = 0);
// A rank's optimizer step over `parameters` in `tensors` (what it holds) under `layout`: ZeRO's
// stages (1 to 3) shard the optimizer's state over the data-parallel group, so a rank steps its
// 1/d of the parameters in about 1/d of the tensors (ZeRO-1 the whole tensors it owns; ZeRO-2 and
// FSDP pieces of flat shards, a few more where a tensor straddles two ranks).
double rank_optimizer_seconds(const HardwareProfile& hw, const TrainingLayout& layout,
                              double parameters, double tensors);
// Clipping a rank's gradients to a global norm before the step (optimizer.clip_grad_norm), over
// its `parameters` in `tensors` gradient tensors, then scaling every gradient (which happens
// whenever the norm is above the limit; a projection, which has no gradients, assumes it).
// `in_fp64`: as strategies/sharded/flat_shard.cpp clips model-parallel ranks and ZeRO-2/3
// shards, each gradient cast to fp64, squared and summed, and the sum copied to the host before
// the next tensor's (4 + 8, 8 + 8 and 8 bytes a parameter, four operators a tensor, one after
// another); otherwise as torch::nn::utils::clip_grad_norm_, an fp32 norm a tensor and no wait.
double clip_seconds(const HardwareProfile& hw, double parameters, double tensors, bool in_fp64);

// The parameter tensors of our GPT: per block two LayerNorms and four Linears, each a weight and
// a bias; the token and position embeddings, the final LayerNorm's two, and an untied head.
// With a mixture of experts, the router and each expert (the experts spread over `ep` ranks).
int64_t parameter_tensors(const ModelShape& model, int ep = 1);

}  // namespace shardscope::profiling
