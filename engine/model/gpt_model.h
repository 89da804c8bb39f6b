#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "engine/model/batch.h"
#include "engine/model/core_attention.h"
#include "engine/train/config.h"

namespace shardscope::profiling {
class RankEventLog;
}

namespace shardscope {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

struct CausalSelfAttentionImpl : torch::nn::Module {
  CausalSelfAttentionImpl(int d_model, int heads);
  torch::Tensor forward(const torch::Tensor& x);

  int heads;
  // The kernels, selective recompute, and what context parallelism runs instead (its ring).
  AttentionSettings attention;
  torch::nn::Linear qkv{nullptr};
  torch::nn::Linear proj{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

struct MlpImpl : torch::nn::Module {
  MlpImpl(int d_model, int hidden);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear fc{nullptr};
  torch::nn::Linear proj{nullptr};
};
TORCH_MODULE(Mlp);

// A mixture of experts in place of the MLP: a learned router (no bias) scores every token
// against `experts` MLPs; each token goes to its top_k, whose outputs are summed weighted by the
// router's probabilities renormalised over those k (Mixtral's rule; with k = 1 the probability
// itself, as in the Switch Transformer). Dropless: every expert
// computes every token sent to it, so nothing depends on how tokens are batched (exact against
// one device), and every expert runs each forward even on no tokens, so each gets a gradient.
//
// `tokens` [N, d], each token's chosen experts [N, k] and their weights [N, k] (fp32) -> the
// weighted sum of its experts' outputs [N, d]: where the experts run. Expert parallelism, whose
// ranks hold E/e experts each, sends the tokens to them instead.
using ExpertsFn =
    std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>;

struct MoeImpl : torch::nn::Module {
  MoeImpl(int d_model, int hidden, int experts, int top_k);
  torch::Tensor forward(const torch::Tensor& x);
  // Every expert computes the tokens chosen for it here (the default of `experts_fn`).
  torch::Tensor local_experts(const torch::Tensor& tokens, const torch::Tensor& chosen,
                              const torch::Tensor& weights);

  int top_k;
  torch::nn::Linear router{nullptr};
  torch::nn::ModuleList experts{nullptr};
  ExpertsFn experts_fn;  // unset: local_experts
  // Tokens this module's router sent to each expert in the forwards since the last take
  // (counted on the host; a block recomputed in backward is not counted again).
  std::vector<int64_t> tokens_per_expert;
};
TORCH_MODULE(Moe);

// Pre-LayerNorm transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)) (or moe(ln2(x))).
struct BlockImpl : torch::nn::Module {
  BlockImpl(int d_model, int heads, int mlp_hidden, int experts = 0, int top_k = 0);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::LayerNorm ln1{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::LayerNorm ln2{nullptr};
  Mlp mlp{nullptr};  // null with experts
  Moe moe{nullptr};  // null without
};
TORCH_MODULE(Block);

// GPT-style decoder: token + position embedding, pre-LN blocks, final LN, untied LM head unless
// the config ties it. Initialisation depends on the seed and each parameter's name only, never
// on the rank or the order of construction, so every strategy can cut its shards from it.
struct GptModelImpl : torch::nn::Module {
  GptModelImpl(const ModelConfig& config, uint64_t seed);

  // Logits [B, T, vocab]. `positions` [T] are the tokens' places in their sequences (a rank of a
  // split sequence holds pieces of it); undefined: 0..T-1.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& positions = {});
  torch::Tensor loss(const Batch& batch);  // mean next-token cross-entropy

  // The forward in the pieces strategies wrap (FSDP gathers each unit around its piece):
  // forward = head(block(n-1, ... block(0, embed(tokens)))).
  torch::Tensor embed(const torch::Tensor& tokens, const torch::Tensor& positions = {});
  torch::Tensor block(size_t index, const torch::Tensor& x);  // recomputed in backward if set
  torch::Tensor head(const torch::Tensor& x);                 // final LayerNorm and LM head
  static torch::Tensor loss_of(const torch::Tensor& logits, const torch::Tensor& targets);

  // Parameters in registration order with stable dotted names ("blocks.0.attn.qkv.weight").
  NamedTensors named_params() const;
  int64_t parameter_count() const;
  // Tokens routed to each expert since the last call, [layer * experts + expert]; resets them.
  // Empty for a model without experts.
  std::vector<int64_t> take_routed_tokens();

  ModelConfig config;
  torch::nn::Embedding tok_emb{nullptr};
  torch::nn::Embedding pos_emb{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tied to tok_emb
  torch::Tensor unused;                // only with ModelConfig::unused_parameter
  // Keep only each block's input in forward and recompute the block during backward.
  bool activation_checkpointing = false;

 private:
  void initialise(uint64_t seed);
  // Backward spans of the traced rank: units 0..layers-1 are blocks, `layers` is the head.
  void begin_backward_span(size_t unit);
  void end_backward_span(size_t unit);

  static constexpr size_t kNoSpan = static_cast<size_t>(-1);
  profiling::RankEventLog* traced_log_ = nullptr;
  std::vector<size_t> backward_spans_;
};
TORCH_MODULE(GptModel);

// Parameters of the model `config` describes, without building it.
int64_t parameter_count(const ModelConfig& config);

// The parameter names of the model `config` describes, in model order, without building it at
// size (the names depend on its structure alone): for checking names a user gives.
std::vector<std::string> parameter_names(const ModelConfig& config);

// The value every run starts from for one named parameter (also used by tests).
uint64_t parameter_seed(uint64_t seed, const std::string& name);

}  // namespace shardscope
