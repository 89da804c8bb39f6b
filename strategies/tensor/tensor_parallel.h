#pragma once

#include <cstdint>

#include <torch/types.h>

namespace shardscope {

class Comm;

// Megatron-style tensor-parallel building blocks over a group of t ranks (`comm`'s group). Each
// is differentiable and communicates in backward what its forward implies; the `tp` strategy is
// built from them.
namespace tp {

// Every rank's `x` stacked along a new leading dimension: [t, x.sizes()...] (not differentiable).
torch::Tensor all_gather_stacked(const torch::Tensor& x, Comm& comm);

// f: identity in forward, all-reduce of the gradient in backward (before a column-parallel op).
torch::Tensor copy_to_region(const torch::Tensor& x, Comm& comm);
// g: all-reduce in forward, identity in backward (after a row-parallel op).
torch::Tensor reduce_from_region(const torch::Tensor& x, Comm& comm);
// All-gather along the last dimension; backward keeps this rank's slice of the gradient.
torch::Tensor gather_last_dim(const torch::Tensor& x, Comm& comm);

// Sequence parallelism: [B, T/t, ...] on each rank <-> [B, T, ...]. gather_sequence all-gathers
// along dim 1 (backward: reduce-scatter of the gradient); reduce_scatter_sequence sums partial
// results over ranks and keeps this rank's part of dim 1 (backward: all-gather).
torch::Tensor gather_sequence(const torch::Tensor& x, Comm& comm);
torch::Tensor reduce_scatter_sequence(const torch::Tensor& x, Comm& comm);
// F::linear(gather_sequence(x), weight, bias) that keeps only x's shard for backward (in the
// product's dtype) and gathers it again there for the weight's gradient, as Megatron's
// column-parallel Linear does under sequence parallelism.
torch::Tensor sequence_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight,
                                       const torch::Tensor& bias, Comm& comm);

// Part `part` of `parts` equal parts of `full` along `dim` (a copy).
torch::Tensor shard_of(const torch::Tensor& full, int64_t dim, int part, int parts);

// y_local = x W_local^T + b_local: this rank's slice of the output features.
torch::Tensor column_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight_shard,
                                     const torch::Tensor& bias_shard, Comm& comm);
// y = sum over ranks of x_local W_local^T, plus the (replicated) bias once.
torch::Tensor row_parallel_linear(const torch::Tensor& x_shard, const torch::Tensor& weight_shard,
                                  const torch::Tensor& bias, Comm& comm);
// This rank's rows of the embedding lookup (zeros for tokens another rank holds): summing over
// ranks gives the full lookup.
torch::Tensor vocab_parallel_lookup(const torch::Tensor& tokens, const torch::Tensor& weight_shard,
                                    int64_t vocab_begin);
// Embedding whose rows [vocab_begin, vocab_begin + rows) live on this rank.
torch::Tensor vocab_parallel_embedding(const torch::Tensor& tokens,
                                       const torch::Tensor& weight_shard, int64_t vocab_begin,
                                       Comm& comm);
// Mean cross-entropy of logits split along the vocabulary ([N, V/t] here, columns starting at
// vocab_begin), without ever forming the full [N, V] logits on one rank.
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits_shard,
                                           const torch::Tensor& targets, int64_t vocab_begin,
                                           Comm& comm);

}  // namespace tp
}  // namespace shardscope
