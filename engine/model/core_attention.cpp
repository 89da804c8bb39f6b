#include "engine/model/core_attention.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "engine/model/activation_checkpoint.h"

namespace shardscope {

bool is_attention_kernel(const std::string& name) {
  for (const char* kernel : kAttentionKernels) {
    if (name == kernel) return true;
  }
  return false;
}

AttentionSettings attention_settings(const ModelConfig& model) {
  AttentionSettings settings;
  settings.unfused = model.attention == kAttentionKernels[1];
  settings.recompute = model.selective_recompute;
  return settings;
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, bool unfused) {
  if (!unfused) {
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                            /*is_causal=*/true);
  }
  // Scaling q, not the scores, moves s*d elements instead of s*s. The matmul's output is saved by
  // nobody, so the mask is filled in place; the softmax keeps the scores' dtype (under bf16
  // autocast it would otherwise write fp32, twice the bytes Megatron's fused kernel writes).
  const int64_t time = q.size(-2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = at::matmul(q * scale, k.transpose(-2, -1));
  const auto future = at::ones({time, time}, q.options().dtype(at::kBool)).triu(1);
  scores.masked_fill_(future, -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1, scores.scalar_type()), v);
}

torch::Tensor attention_of_qkv(const torch::Tensor& qkv, int64_t heads,
                               const AttentionSettings& settings) {
  auto run = [heads, settings](const torch::Tensor& x) {
    const int64_t batch = x.size(0), time = x.size(1), width = x.size(2) / 3;
    auto split = x.split(width, /*dim=*/2);
    auto heads_view = [&](const torch::Tensor& t) {
      return t.reshape({batch, time, heads, width / heads}).transpose(1, 2);
    };
    auto q = heads_view(split[0]), k = heads_view(split[1]), v = heads_view(split[2]);
    auto y =
        settings.replace ? settings.replace(q, k, v) : causal_attention(q, k, v, settings.unfused);
    return y.transpose(1, 2).contiguous().view({batch, time, width});
  };
  return settings.recompute ? recompute_in_backward(run, qkv) : run(qkv);
}

}  // namespace shardscope
