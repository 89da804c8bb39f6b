// `tp` (tensor parallel, Megatron style, degree t = world): attention heads split across ranks
// (query/key/value column-parallel, output projection row-parallel), MLP up column-parallel and
// down row-parallel, vocabulary-parallel embedding and LM head with a parallel cross-entropy
// that never forms the full logits; LayerNorms, position embedding and row-parallel biases are
// replicated. Every shard is cut from the same full initialisation the reference uses. All
// ranks of a tensor-parallel group compute on the same sequences: each rank's micro-batch is
// all-gathered, so the group trains on exactly the global batch.
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/normalization.h>
#include <torch/torch.h>

#include "engine/comm.h"
#include "engine/config.h"
#include "engine/mixed_precision.h"
#include "engine/optimizer_factory.h"
#include "engine/strategy_registry.h"
#include "engine/weights.h"
#include "profiling/host_tracing.h"
#include "strategies/flat_shard.h"
#include "strategies/option_support.h"
#include "strategies/replicated_strategy.h"
#include "strategies/tensor_parallel.h"

namespace shardscope {
namespace {

namespace F = torch::nn::functional;

// How a full parameter is cut across the group.
enum class Cut {
  kReplicated,
  kRows,     // dim 0 in t equal parts
  kColumns,  // dim 1 in t equal parts
  kQkvRows,  // dim 0 is [q; k; v]: each of the three cut in rows, this rank's thirds stacked
};

struct Shard {
  std::string name;
  Cut cut = Cut::kReplicated;
  torch::Tensor local;  // a leaf this rank trains
};

class TensorParallelStrategy final : public Strategy {
 public:
  void setup(RankContext& ctx) override {
    ctx_ = &ctx;
    const ModelConfig& m = ctx.config->model;
    t_ = ctx.world;
    rank_ = ctx.rank;
    GptModel full(m, ctx.config->seed);
    torch::NoGradGuard no_grad;
    for (const auto& [name, p] : full->named_params()) {
      Shard s;
      s.name = name;
      s.cut = cut_of(name);
      s.local = cut(p.detach(), s.cut).to(ctx.device).set_requires_grad(p.requires_grad());
      index_[name] = shards_.size();
      shards_.push_back(std::move(s));
    }
    for (auto& s : shards_) {
      if (s.local.requires_grad()) trainable_.push_back(s.local);
    }
    optimizer_ = make_optimizer(ctx.config->optimizer, trainable_);
  }

  torch::Tensor forward_backward(const Batch& batch, bool, double loss_scale) override {
    Batch group_batch{gather_batch(batch.inputs), gather_batch(batch.targets)};
    torch::Tensor loss;
    {
      ComputePrecisionScope precision(ctx_->config->strategy_options, ctx_->device.type());
      loss = forward(group_batch);
    }
    (loss * loss_scale).backward();
    return loss.detach();
  }

  void sync_gradients() override {
    // With sequence parallelism each rank saw only its part of the sequence in the replicated
    // regions, so their gradients are partial sums; without it they are already whole.
    if (!ctx_->config->strategy_options.sequence_parallel) return;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads;
    for (auto& s : shards_) {
      if (s.cut != Cut::kReplicated || !s.local.requires_grad()) continue;
      // A parameter without a gradient has none on every rank (the graphs are the same).
      if (s.local.grad().defined()) grads.push_back(s.local.grad());
    }
    if (grads.empty()) return;
    auto flat = at::flatten_dense_tensors(grads);
    ctx_->comm->all_reduce(flat);
    auto pieces = at::unflatten_dense_tensors(flat, grads);
    for (size_t i = 0; i < grads.size(); ++i) grads[i].copy_(pieces[i]);
  }

  double clip_gradients(double max_norm) override {
    // Sharded parameters contribute their slices from every rank; replicated ones once.
    std::vector<torch::Tensor> sharded, replicated;
    for (auto& s : shards_) (s.cut == Cut::kReplicated ? replicated : sharded).push_back(s.local);
    return clip_sharded_gradients(*ctx_->comm, sharded, max_norm, replicated);
  }

  void optimizer_step(double lr) override {
    set_learning_rate(*optimizer_, lr);
    optimizer_->step();
  }

  void zero_grad() override {
    for (auto& p : trainable_) p.mutable_grad() = torch::Tensor();
  }

  NamedTensors full_weights() override {
    NamedTensors out;
    for (const auto& s : shards_) out.emplace_back(s.name, uncut(s.local.detach().cpu(), s.cut));
    return out;
  }

  bool replicated() const override { return false; }

  MemoryBytes memory() const override {
    MemoryBytes bytes;
    int64_t trainable = 0;
    for (const auto& s : shards_) bytes.parameters += s.local.nbytes();
    for (const auto& p : trainable_) trainable += p.nbytes();
    bytes.gradients = trainable;
    bytes.optimizer_state =
        static_cast<int64_t>(trainable * optimizer_state_ratio(ctx_->config->optimizer));
    return bytes;
  }

 private:
  static Cut cut_of(const std::string& name) {
    auto ends = [&](const std::string& suffix) {
      return name.size() >= suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (name == "tok_emb.weight" || name == "lm_head.weight") return Cut::kRows;
    if (ends("attn.qkv.weight") || ends("attn.qkv.bias")) return Cut::kQkvRows;
    if (ends("attn.proj.weight") || ends("mlp.proj.weight")) return Cut::kColumns;
    if (ends("mlp.fc.weight") || ends("mlp.fc.bias")) return Cut::kRows;
    return Cut::kReplicated;
  }

  torch::Tensor cut(const torch::Tensor& full, Cut how) const {
    switch (how) {
      case Cut::kRows:
        return tp::shard_of(full, 0, rank_, t_);
      case Cut::kColumns:
        return tp::shard_of(full, 1, rank_, t_);
      case Cut::kQkvRows: {
        auto thirds = full.chunk(3, 0);
        return torch::cat(
            {tp::shard_of(thirds[0], 0, rank_, t_), tp::shard_of(thirds[1], 0, rank_, t_),
             tp::shard_of(thirds[2], 0, rank_, t_)},
            0);
      }
      case Cut::kReplicated:
        break;
    }
    return full.clone();
  }

  // The inverse of cut(): every rank's shard gathered into the full tensor.
  torch::Tensor uncut(const torch::Tensor& local, Cut how) {
    if (how == Cut::kReplicated) return local.clone();
    auto parts = tp::all_gather_stacked(local, *ctx_->comm);  // [t, local...]
    if (how == Cut::kRows) return torch::cat(parts.unbind(0), 0);
    if (how == Cut::kColumns) return torch::cat(parts.unbind(0), 1);
    // kQkvRows: each part is [q_r; k_r; v_r]; the full tensor is [q_0..q_t; k_...; v_...].
    std::vector<torch::Tensor> q, k, v;
    for (const auto& part : parts.unbind(0)) {
      auto thirds = part.chunk(3, 0);
      q.push_back(thirds[0]);
      k.push_back(thirds[1]);
      v.push_back(thirds[2]);
    }
    return torch::cat({torch::cat(q, 0), torch::cat(k, 0), torch::cat(v, 0)}, 0);
  }

  const torch::Tensor& param(const std::string& name) const {
    return shards_[index_.at(name)].local;
  }

  torch::Tensor gather_batch(const torch::Tensor& local) {
    return tp::all_gather_stacked(local, *ctx_->comm).flatten(0, 1);  // ranks' sequences in order
  }

  torch::Tensor layer_norm(const torch::Tensor& x, const std::string& prefix) const {
    return F::layer_norm(x, F::LayerNormFuncOptions({x.size(-1)})
                                .weight(param(prefix + ".weight"))
                                .bias(param(prefix + ".bias")));
  }

  torch::Tensor forward(const Batch& batch) {
    const ModelConfig& m = ctx_->config->model;
    Comm& comm = *ctx_->comm;
    const bool sp = ctx_->config->strategy_options.sequence_parallel;
    const int64_t vocab_rows = m.vocab / t_;
    const int64_t time = batch.inputs.size(1);
    // Into a tensor-parallel region (column-parallel input) and out of it (row-parallel output):
    // all-reduce pairs, or with sequence parallelism all-gather / reduce-scatter along the
    // sequence, the LayerNorm and residual regions then holding T/t positions per rank.
    auto enter = [&](const torch::Tensor& h) {
      return sp ? tp::gather_sequence(h, comm) : tp::copy_to_region(h, comm);
    };
    auto leave = [&](const torch::Tensor& y) {
      return sp ? tp::reduce_scatter_sequence(y, comm) : tp::reduce_from_region(y, comm);
    };
    torch::Tensor x;
    {
      profiling::ScopedSpan span(profiling::Category::kForward, "forward embeddings");
      const int64_t first = sp ? rank_ * time / t_ : 0, length = sp ? time / t_ : time;
      auto positions =
          torch::arange(first, first + length, batch.inputs.options().dtype(torch::kLong));
      auto tokens =
          tp::vocab_parallel_lookup(batch.inputs, param("tok_emb.weight"), rank_ * vocab_rows);
      x = leave(tokens) + F::embedding(positions, param("pos_emb.weight")).unsqueeze(0);
    }
    const int64_t local_heads = m.heads / t_, head_dim = m.d_model / m.heads;
    for (int i = 0; i < m.layers; ++i) {
      profiling::ScopedSpan span(profiling::Category::kForward,
                                 "forward blocks." + std::to_string(i));
      const std::string b = "blocks." + std::to_string(i);
      auto qkv = F::linear(enter(layer_norm(x, b + ".ln1")), param(b + ".attn.qkv.weight"),
                           param(b + ".attn.qkv.bias"));
      auto split = qkv.chunk(3, 2);
      auto heads = [&](const torch::Tensor& z) {
        return z.reshape({z.size(0), z.size(1), local_heads, head_dim}).transpose(1, 2);
      };
      auto y = at::scaled_dot_product_attention(heads(split[0]), heads(split[1]), heads(split[2]),
                                                {}, 0.0, /*is_causal=*/true);
      y = y.transpose(1, 2).reshape({y.size(0), y.size(2), local_heads * head_dim});
      x = x + leave(F::linear(y, param(b + ".attn.proj.weight"))) + param(b + ".attn.proj.bias");
      auto hidden = F::linear(enter(layer_norm(x, b + ".ln2")), param(b + ".mlp.fc.weight"),
                              param(b + ".mlp.fc.bias"));
      hidden = F::gelu(hidden, F::GELUFuncOptions().approximate("tanh"));
      x = x + leave(F::linear(hidden, param(b + ".mlp.proj.weight"))) + param(b + ".mlp.proj.bias");
    }
    profiling::ScopedSpan span(profiling::Category::kForward, "forward head");
    const auto& head = m.tie_embeddings ? param("tok_emb.weight") : param("lm_head.weight");
    auto logits = F::linear(enter(layer_norm(x, "ln_f")), head);
    return tp::vocab_parallel_cross_entropy(logits.reshape({-1, vocab_rows}),
                                            batch.targets.reshape({-1}), rank_ * vocab_rows, comm);
  }

  RankContext* ctx_ = nullptr;
  int t_ = 1;
  int rank_ = 0;
  std::vector<Shard> shards_;
  std::map<std::string, size_t> index_;
  std::vector<torch::Tensor> trainable_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

void require_divides(int t, int value, const char* field, const char* what) {
  if (value % t != 0) {
    throw ConfigError(field, std::string(what) + " " + std::to_string(value) +
                                 " does not divide by the tensor-parallel degree " +
                                 std::to_string(t));
  }
}

const StrategyRegistrar registrar({
    "tp",
    "tensor parallel (Megatron): heads, MLP and vocabulary split across all ranks",
    [] { return std::unique_ptr<Strategy>(std::make_unique<TensorParallelStrategy>()); },
    [](const Config& config) {
      const ModelConfig& m = config.model;
      const int t = config.world;
      require_divides(t, m.heads, "model.heads", "heads");
      require_divides(t, m.vocab, "model.vocab", "vocabulary");
      require_divides(t, m.d_model * m.mlp_ratio, "model.mlp_ratio", "MLP width");
      if (config.strategy_options.sequence_parallel) {
        require_divides(t, m.seq, "model.seq", "sequence length");
      }
      OptionSupport support;
      support.activation_checkpointing = false;
      support.sequence_parallel = true;
      validate_option_support(config, support);
    },
});

}  // namespace
}  // namespace shardscope
