#pragma once

#include <functional>
#include <string>

#include <torch/types.h>

#include "engine/train/config.h"

namespace shardscope {

// Causal attention of q, k, v laid out [batch, heads, time, head size]: what a strategy that
// splits the sequence (context parallelism) replaces, since no rank holds every key.
using AttentionFn =
    std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>;

// The kernels a block's attention runs (ModelConfig::attention):
// - "sdpa": PyTorch's scaled_dot_product_attention (flash on a GPU), which keeps no s x s matrix;
// - "unfused": the scores q k^T / sqrt(d) materialised, masked, a softmax and its product with v,
//   as Megatron-LM's core attention ran in Korthikanti et al. 2022 (less its dropout): the
//   softmax is saved for backward, s x s per head.
inline constexpr const char* kAttentionKernels[] = {"sdpa", "unfused"};
bool is_attention_kernel(const std::string& name);

struct AttentionSettings {
  bool unfused = false;
  // Selective recompute (Korthikanti et al.): keep only the qkv output and run the attention
  // again in backward, so no s x s matrix is kept between the passes.
  bool recompute = false;
  AttentionFn replace;  // set: runs instead of either kernel (context parallelism's ring)
};

// What `model` asks of every block's attention.
AttentionSettings attention_settings(const ModelConfig& model);

// Causal attention over q, k, v [batch, heads, time, head size] with the chosen kernel.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, bool unfused);

// A block's attention between its qkv Linear and its projection: `qkv` [batch, time, 3 * heads *
// head size] (q, k, v side by side, `heads` of them on this rank) -> [batch, time, heads * head
// size].
torch::Tensor attention_of_qkv(const torch::Tensor& qkv, int64_t heads,
                               const AttentionSettings& settings);

}  // namespace shardscope
