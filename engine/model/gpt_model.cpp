#include "engine/model/gpt_model.h"

#include "engine/model/activation_checkpoint.h"
#include "engine/state/hashing.h"
#include "profiling/record/host_tracing.h"

#include <algorithm>
#include <cmath>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

namespace shardscope {
namespace {

namespace F = torch::nn::functional;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

uint64_t parameter_seed(uint64_t seed, const std::string& name) {
  return mix64(seed ^ mix64(fnv1a(name.data(), name.size())));
}

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int d_model, int heads_) : heads(heads_) {
  qkv = register_module("qkv", torch::nn::Linear(d_model, 3 * d_model));
  proj = register_module("proj", torch::nn::Linear(d_model, d_model));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  return proj->forward(attention_of_qkv(qkv->forward(x), heads, attention));
}

MlpImpl::MlpImpl(int d_model, int hidden) {
  fc = register_module("fc", torch::nn::Linear(d_model, hidden));
  proj = register_module("proj", torch::nn::Linear(hidden, d_model));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return proj->forward(F::gelu(fc->forward(x), F::GELUFuncOptions().approximate("tanh")));
}

MoeImpl::MoeImpl(int d_model, int hidden, int experts_, int top_k_) : top_k(top_k_) {
  router = register_module(
      "router", torch::nn::Linear(torch::nn::LinearOptions(d_model, experts_).bias(false)));
  experts = register_module("experts", torch::nn::ModuleList());
  for (int e = 0; e < experts_; ++e) experts->push_back(Mlp(d_model, hidden));
  tokens_per_expert.assign(experts_, 0);
}

torch::Tensor MoeImpl::forward(const torch::Tensor& x) {
  const auto shape = x.sizes().vec();
  const auto tokens = x.reshape({-1, shape.back()});
  // Routing in fp32 (as Megatron does): a bf16 near-tie could pick another expert.
  const auto probabilities = torch::softmax(router->forward(tokens).to(torch::kFloat), -1);
  auto [weights, chosen] = probabilities.topk(top_k, -1);
  // Renormalised over the k (Mixtral); with one expert that would make every weight 1 and give
  // the router no gradient (Adam would then step on rounding noise), so top-1 keeps the
  // probability itself (Switch Transformer).
  if (top_k > 1) weights = weights / weights.sum(-1, /*keepdim=*/true);
  if (!recomputing_in_backward()) {
    const auto counts = torch::bincount(chosen.reshape({-1}), {}, experts->size()).to(torch::kCPU);
    const auto* count = counts.data_ptr<int64_t>();
    for (size_t e = 0; e < experts->size(); ++e) tokens_per_expert[e] += count[e];
  }
  const auto out =
      experts_fn ? experts_fn(tokens, chosen, weights) : local_experts(tokens, chosen, weights);
  return out.view(shape);
}

torch::Tensor MoeImpl::local_experts(const torch::Tensor& tokens, const torch::Tensor& chosen,
                                     const torch::Tensor& weights) {
  // Per expert: the tokens sent to it and which of their k choices it is. Sorting the flat
  // choices by expert gives every expert's tokens in one pass (stable: token order kept).
  const auto flat = chosen.reshape({-1});
  const auto order = std::get<1>(flat.sort(/*stable=*/true, 0, false));
  const auto counts = torch::bincount(flat, {}, experts->size()).to(torch::kCPU);
  const auto* count = counts.data_ptr<int64_t>();
  auto out = torch::zeros_like(tokens);
  const auto flat_weights = weights.reshape({-1});
  int64_t begin = 0;
  for (size_t e = 0; e < experts->size(); ++e) {
    const auto picks = order.narrow(0, begin, count[e]);  // indices into the flat choices
    begin += count[e];
    const auto token = torch::div(picks, top_k, "floor");
    auto y = experts[e]->as<Mlp>()->forward(tokens.index_select(0, token));
    const auto weight = flat_weights.index_select(0, picks).unsqueeze(1).to(y.scalar_type());
    out.index_add_(0, token, (y * weight).to(out.scalar_type()));  // in place: one [N, d] buffer
  }
  return out;
}

BlockImpl::BlockImpl(int d_model, int heads, int mlp_hidden, int experts, int top_k) {
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model})));
  attn = register_module("attn", CausalSelfAttention(d_model, heads));
  ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model})));
  if (experts > 0) {
    moe = register_module("moe", Moe(d_model, mlp_hidden, experts, top_k));
  } else {
    mlp = register_module("mlp", Mlp(d_model, mlp_hidden));
  }
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  auto h = x + attn->forward(ln1->forward(x));
  const auto normed = ln2->forward(h);
  return h + (moe ? moe->forward(normed) : mlp->forward(normed));
}

GptModelImpl::GptModelImpl(const ModelConfig& c, uint64_t seed) : config(c) {
  tok_emb = register_module("tok_emb", torch::nn::Embedding(c.vocab, c.d_model));
  pos_emb = register_module("pos_emb", torch::nn::Embedding(c.seq, c.d_model));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int i = 0; i < c.layers; ++i) {
    Block block(c.d_model, c.heads, c.d_model * c.mlp_ratio, c.experts, c.top_k);
    block->attn->attention = attention_settings(c);
    blocks->push_back(block);
  }
  ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.d_model})));
  if (!c.tie_embeddings) {
    lm_head = register_module(
        "lm_head", torch::nn::Linear(torch::nn::LinearOptions(c.d_model, c.vocab).bias(false)));
  }
  if (c.unused_parameter) unused = register_parameter("unused", torch::empty({c.d_model}));
  initialise(seed);

  auto params = named_parameters(/*recurse=*/true);
  for (const auto& name : c.frozen) {
    auto* p = params.find(name);
    if (p == nullptr) throw ConfigError("model.frozen", "no parameter named '" + name + "'");
    p->set_requires_grad(false);
  }
}

void GptModelImpl::initialise(uint64_t seed) {
  torch::NoGradGuard no_grad;
  // GPT-2: residual projections scaled down with depth so the residual stream stays O(1).
  const double residual_std = 0.02 / std::sqrt(2.0 * config.layers);
  for (auto& item : named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    auto generator = at::make_generator<at::CPUGeneratorImpl>(parameter_seed(seed, name));
    if (ends_with(name, ".bias")) {
      p.zero_();
    } else if (name.find("ln") != std::string::npos) {  // LayerNorm gains
      p.fill_(1.0);
    } else {
      bool residual =
          ends_with(name, "attn.proj.weight") || ends_with(name, "mlp.proj.weight") ||
          (name.find(".moe.experts.") != std::string::npos && ends_with(name, ".proj.weight"));
      p.normal_(0.0, residual ? residual_std : 0.02, generator);
    }
  }
}

torch::Tensor GptModelImpl::embed(const torch::Tensor& tokens, const torch::Tensor& positions) {
  const auto time = tokens.size(1);
  TORCH_CHECK(time <= config.seq, "sequence of ", time, " tokens exceeds model.seq ", config.seq);
  TORCH_CHECK(!positions.defined() || positions.numel() == time, "positions for ",
              positions.defined() ? positions.numel() : 0, " of ", time, " tokens");
  // A new forward pass: its backward spans go to the rank running it (if it is traced).
  traced_log_ = torch::GradMode::is_enabled() ? profiling::current_rank_log() : nullptr;
  backward_spans_.assign(config.layers + 1, kNoSpan);
  profiling::ScopedSpan span(profiling::Category::kForward, "forward embeddings");
  const auto places =
      positions.defined() ? positions : torch::arange(time, tokens.options().dtype(torch::kLong));
  return tok_emb->forward(tokens) + pos_emb->forward(places).unsqueeze(0);
}

torch::Tensor GptModelImpl::block(size_t index, const torch::Tensor& x) {
  BlockImpl* block = blocks[index]->as<Block>();
  // The gradient of a block's input is ready when its backward ends, which is when the backward
  // of the block before it begins: one hook per input marks both, so spans never overlap.
  if (traced_log_ != nullptr && x.requires_grad()) {
    x.register_hook([this, index](const torch::Tensor&) {
      end_backward_span(index);
      if (index > 0) begin_backward_span(index - 1);
    });
  }
  profiling::ScopedSpan span(profiling::Category::kForward,
                             "forward blocks." + std::to_string(index));
  if (!activation_checkpointing) return block->forward(x);
  return recompute_in_backward(
      [block](const torch::Tensor& input) { return block->forward(input); }, x);
}

torch::Tensor GptModelImpl::head(const torch::Tensor& x) {
  const size_t head_index = blocks->size();
  if (traced_log_ != nullptr && x.requires_grad()) {
    x.register_hook([this, head_index](const torch::Tensor&) {
      end_backward_span(head_index);
      if (head_index > 0) begin_backward_span(head_index - 1);
    });
  }
  torch::Tensor logits;
  {
    profiling::ScopedSpan span(profiling::Category::kForward, "forward head");
    auto h = ln_f->forward(x);
    logits = lm_head ? lm_head->forward(h) : F::linear(h, tok_emb->weight);
  }
  if (traced_log_ != nullptr && logits.requires_grad()) {
    logits.register_hook(
        [this, head_index](const torch::Tensor&) { begin_backward_span(head_index); });
  }
  return logits;
}

void GptModelImpl::begin_backward_span(size_t unit) {
  if (traced_log_ == nullptr || unit >= backward_spans_.size()) return;
  const std::string name =
      unit == blocks->size() ? "backward head" : "backward blocks." + std::to_string(unit);
  backward_spans_[unit] = traced_log_->begin_span(name, profiling::Category::kBackward);
}

void GptModelImpl::end_backward_span(size_t unit) {
  if (traced_log_ == nullptr || unit >= backward_spans_.size()) return;
  if (backward_spans_[unit] != kNoSpan) traced_log_->end_span(backward_spans_[unit]);
}

torch::Tensor GptModelImpl::forward(const torch::Tensor& tokens, const torch::Tensor& positions) {
  auto x = embed(tokens, positions);
  for (size_t i = 0; i < blocks->size(); ++i) x = block(i, x);
  return head(x);
}

torch::Tensor GptModelImpl::loss_of(const torch::Tensor& logits, const torch::Tensor& targets) {
  // In fp32 even under bf16 autocast: the softmax over the vocabulary is where bf16 hurts most.
  return F::cross_entropy(logits.view({-1, logits.size(-1)}).to(torch::kFloat),
                          targets.reshape({-1}));
}

torch::Tensor GptModelImpl::loss(const Batch& batch) {
  return loss_of(forward(batch.inputs), batch.targets);
}

NamedTensors GptModelImpl::named_params() const {
  NamedTensors out;
  for (const auto& item : named_parameters(/*recurse=*/true))
    out.emplace_back(item.key(), item.value());
  return out;
}

int64_t parameter_count(const ModelConfig& c) {
  const int64_t d = c.d_model, hidden = d * c.mlp_ratio;
  const int64_t mlp = d * hidden + hidden    // fc
                      + hidden * d + d;      // projection
  const int64_t block = 2 * d                // ln1
                        + d * 3 * d + 3 * d  // qkv
                        + d * d + d          // attention projection
                        + 2 * d              // ln2
                        + (c.experts > 0 ? c.experts * mlp + d * c.experts : mlp);  // + router
  return c.vocab * d + c.seq * d + c.layers * block + 2 * d + (c.tie_embeddings ? 0 : c.vocab * d) +
         (c.unused_parameter ? d : 0);
}

std::vector<std::string> parameter_names(const ModelConfig& config) {
  ModelConfig shape = config;
  shape.vocab = 2, shape.seq = 1, shape.mlp_ratio = 1;
  shape.heads = 1, shape.d_model = 1;
  shape.frozen.clear();
  std::vector<std::string> names;
  for (const auto& item : GptModel(shape, 0)->named_parameters(/*recurse=*/true))
    names.push_back(item.key());
  return names;
}

std::vector<int64_t> GptModelImpl::take_routed_tokens() {
  std::vector<int64_t> routed;
  for (size_t i = 0; i < blocks->size(); ++i) {
    auto moe = blocks[i]->as<Block>()->moe;
    if (!moe) continue;
    routed.insert(routed.end(), moe->tokens_per_expert.begin(), moe->tokens_per_expert.end());
    std::fill(moe->tokens_per_expert.begin(), moe->tokens_per_expert.end(), 0);
  }
  return routed;
}

int64_t GptModelImpl::parameter_count() const {
  int64_t count = 0;
  for (const auto& p : parameters()) count += p.numel();
  return count;
}

}  // namespace shardscope
