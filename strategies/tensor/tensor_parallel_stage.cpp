#include "strategies/tensor/tensor_parallel_stage.h"

#include <ATen/autocast_mode.h>

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/embedding.h>
#include <torch/nn/functional/normalization.h>
#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/model/core_attention.h"
#include "engine/state/initial_weights.h"
#include "profiling/record/host_tracing.h"
#include "strategies/tensor/tensor_parallel.h"

namespace shardscope {
namespace {

namespace F = torch::nn::functional;

bool ends_with(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int block_of(const std::string& name) {
  if (name.rfind("blocks.", 0) != 0) return -1;
  return std::stoi(name.substr(7));
}

}  // namespace

TensorParallelStage::TensorParallelStage(const Config& config, const StageSpec& spec,
                                         Comm& tensor_comm, c10::Device device)
    : config_(config),
      spec_(spec),
      comm_(tensor_comm),
      t_(tensor_comm.size()),
      rank_(tensor_comm.rank()) {
  GptModel full = initial_model(config);  // the full weights, then this rank's cut
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : full->named_params()) {
    model_shapes_.emplace_back(name, p.sizes().vec());
    if (!holds(spec, name)) continue;
    Shard s;
    s.name = name;
    s.cut = cut_of(name);
    // A tensor of its own, not a view of the full model's, which would keep the whole model's
    // storage alive on every rank (on the CPU, `to` returns the view itself).
    torch::Tensor local = cut(p.detach(), s.cut).to(device);
    if (local.is_view()) local = local.clone();
    s.local = local.set_requires_grad(p.requires_grad());
    index_[name] = shards_.size();
    shards_.push_back(std::move(s));
  }
  for (auto& s : shards_) {
    if (!s.local.requires_grad()) continue;
    trainable_.push_back(s.local);
    trainable_names_.push_back(s.name);
  }
}

bool TensorParallelStage::holds(const StageSpec& spec, const std::string& name) {
  const int block = block_of(name);
  if (block >= 0) return block >= spec.first_block && block < spec.last_block;
  // Tied embeddings need a single stage (validation rejects them across stages).
  if (name == "tok_emb.weight" || name == "pos_emb.weight") return spec.first;
  return spec.last;  // ln_f, lm_head, and the never-used parameter of the DDP corner case
}

std::vector<std::pair<std::string, std::vector<int64_t>>> TensorParallelStage::full_shapes(
    const StageSpec& spec) const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& [name, shape] : model_shapes_) {
    if (holds(spec, name)) out.emplace_back(name, shape);
  }
  return out;
}

TensorParallelStage::Cut TensorParallelStage::cut_of(const std::string& name) {
  if (name == "tok_emb.weight" || name == "lm_head.weight") return Cut::kRows;
  if (ends_with(name, "attn.qkv.weight") || ends_with(name, "attn.qkv.bias")) return Cut::kQkvRows;
  if (ends_with(name, "attn.proj.weight") || ends_with(name, "mlp.proj.weight"))
    return Cut::kColumns;
  if (ends_with(name, "mlp.fc.weight") || ends_with(name, "mlp.fc.bias")) return Cut::kRows;
  return Cut::kReplicated;
}

torch::Tensor TensorParallelStage::cut(const torch::Tensor& full, Cut how) const {
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

std::vector<std::vector<StateBinding::Entry>> TensorParallelStage::state_entries() const {
  std::vector<std::vector<StateBinding::Entry>> out;
  for (const Shard& s : shards_) {
    std::vector<StateBinding::Entry> entries;
    auto add = [&](int dim, int64_t begin, const torch::Tensor& value, int64_t key_begin,
                   int64_t key_rows) {
      StateBinding::Entry e;
      e.region = {s.name, dim, begin, dim < 0 ? value.numel() : value.size(dim)};
      e.value = value;
      e.written = s.cut != Cut::kReplicated || rank_ == 0;
      e.key = s.local;
      e.key_begin = key_begin;
      e.key_rows = key_rows;
      entries.push_back(std::move(e));
    };
    switch (s.cut) {
      case Cut::kReplicated:
        add(-1, 0, s.local, 0, -1);
        break;
      case Cut::kRows:
        add(0, rank_ * s.local.size(0), s.local, 0, -1);
        break;
      case Cut::kColumns:
        add(1, rank_ * s.local.size(1), s.local, 0, -1);
        break;
      case Cut::kQkvRows: {
        // The local rows are [q_r; k_r; v_r]; in the full tensor each third has t such parts.
        const int64_t part = s.local.size(0) / 3;
        for (int64_t third = 0; third < 3; ++third) {
          add(0, third * part * t_ + rank_ * part, s.local.narrow(0, third * part, part),
              third * part, part);
        }
        break;
      }
    }
    out.push_back(std::move(entries));
  }
  return out;
}

torch::Tensor TensorParallelStage::uncut(const torch::Tensor& local, Cut how) {
  if (how == Cut::kReplicated || t_ == 1) return local.clone();
  auto parts = tp::all_gather_stacked(local, comm_);  // [t, local...]
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

void TensorParallelStage::share_weight_casts(bool on) {
  share_casts_ = on;
  if (!on) {
    for (auto& s : shards_) s.cast = torch::Tensor();
  }
}

torch::Tensor TensorParallelStage::linear_weight(const std::string& name) {
  Shard& shard = shards_[index_.at(name)];
  const auto device = shard.local.device().type();
  if (!share_casts_ || !at::autocast::is_autocast_enabled(device) ||
      shard.local.scalar_type() != at::kFloat)
    return shard.local;
  if (!shard.cast.defined()) shard.cast = shard.local.to(at::autocast::get_autocast_dtype(device));
  return shard.cast;
}

const torch::Tensor& TensorParallelStage::param(const std::string& name) const {
  return shards_[index_.at(name)].local;
}

torch::Tensor TensorParallelStage::layer_norm(const torch::Tensor& x,
                                              const std::string& prefix) const {
  return F::layer_norm(x, F::LayerNormFuncOptions({x.size(-1)})
                              .weight(param(prefix + ".weight"))
                              .bias(param(prefix + ".bias")));
}

std::vector<int64_t> TensorParallelStage::hidden_shape(int64_t sequences) const {
  const int64_t time = config_.model.seq / (config_.strategy_options.sequence_parallel ? t_ : 1) /
                       std::max(1, ring_.ranks);
  return {sequences, time, config_.model.d_model};
}

torch::Tensor TensorParallelStage::hidden_piece(const torch::Tensor& whole) const {
  TORCH_CHECK(whole.numel() % t_ == 0, "a hidden state of ", whole.numel(),
              " elements does not split over ", t_, " tensor ranks");
  const int64_t part = whole.numel() / t_;
  return whole.contiguous().view({-1}).narrow(0, rank_ * part, part);
}

torch::Tensor TensorParallelStage::gather_hidden(const torch::Tensor& piece,
                                                 const std::vector<int64_t>& shape) {
  torch::Tensor whole = torch::empty({piece.numel() * t_}, piece.options());
  comm_.all_gather_into(whole, piece);
  return whole.view(shape);
}

torch::Tensor TensorParallelStage::forward(const torch::Tensor& input,
                                           const torch::Tensor& targets) {
  const ModelConfig& m = config_.model;
  Comm& comm = comm_;
  const bool sp = config_.strategy_options.sequence_parallel;
  const int64_t vocab_rows = m.vocab / t_;
  // Into a tensor-parallel region (column-parallel input) and out of it (row-parallel output):
  // all-reduce pairs, or with sequence parallelism all-gather / reduce-scatter along the
  // sequence, the LayerNorm and residual regions then holding T/t positions per rank. With one
  // rank in the group there is nothing to exchange.
  auto enter = [&](const torch::Tensor& h) {
    if (t_ == 1) return h;
    return sp ? tp::gather_sequence(h, comm) : tp::copy_to_region(h, comm);
  };
  // A column-parallel Linear on a LayerNorm's output, entering the region; under sequence
  // parallelism it keeps only its shard of the input for backward (Megatron's).
  auto column_linear = [&](const torch::Tensor& h, const torch::Tensor& weight,
                           const torch::Tensor& bias) {
    if (t_ > 1 && sp) return tp::sequence_parallel_linear(h, weight, bias, comm);
    return F::linear(enter(h), weight, bias);
  };
  auto leave = [&](const torch::Tensor& y) {
    if (t_ == 1) return y;
    return sp ? tp::reduce_scatter_sequence(y, comm) : tp::reduce_from_region(y, comm);
  };
  torch::Tensor x = input;
  if (spec_.first) {
    profiling::ScopedSpan span(profiling::Category::kForward, "forward embeddings");
    const int64_t time = input.size(1);
    const int64_t first = sp ? rank_ * time / t_ : 0, length = sp ? time / t_ : time;
    auto positions = positions_.defined() ? positions_
                                          : torch::arange(first, first + length,
                                                          input.options().dtype(torch::kLong));
    auto tokens =
        t_ == 1 ? F::embedding(input, param("tok_emb.weight"))
                : tp::vocab_parallel_lookup(input, param("tok_emb.weight"), rank_ * vocab_rows);
    x = leave(tokens) + F::embedding(positions, param("pos_emb.weight")).unsqueeze(0);
  }
  const int64_t local_heads = m.heads / t_;
  AttentionSettings attention = attention_settings(m);
  if (ring_.ranks > 1) {
    attention.replace = [this](const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v) {
      return cp::ring_attention(q, k, v, ring_);
    };
  }
  for (int i = spec_.first_block; i < spec_.last_block; ++i) {
    profiling::ScopedSpan span(profiling::Category::kForward,
                               "forward blocks." + std::to_string(i));
    const std::string b = "blocks." + std::to_string(i);
    auto qkv = column_linear(layer_norm(x, b + ".ln1"), linear_weight(b + ".attn.qkv.weight"),
                             param(b + ".attn.qkv.bias"));
    auto y = attention_of_qkv(qkv, local_heads, attention);
    x = x + leave(F::linear(y, linear_weight(b + ".attn.proj.weight"))) +
        param(b + ".attn.proj.bias");
    auto hidden = column_linear(layer_norm(x, b + ".ln2"), linear_weight(b + ".mlp.fc.weight"),
                                param(b + ".mlp.fc.bias"));
    hidden = F::gelu(hidden, F::GELUFuncOptions().approximate("tanh"));
    x = x + leave(F::linear(hidden, linear_weight(b + ".mlp.proj.weight"))) +
        param(b + ".mlp.proj.bias");
  }
  if (!spec_.last) return x;
  profiling::ScopedSpan span(profiling::Category::kForward, "forward head");
  const auto head = linear_weight(m.tie_embeddings ? "tok_emb.weight" : "lm_head.weight");
  auto logits = F::linear(enter(layer_norm(x, "ln_f")), head);
  if (t_ == 1) return GptModelImpl::loss_of(logits, targets);
  return tp::vocab_parallel_cross_entropy(logits.reshape({-1, vocab_rows}), targets.reshape({-1}),
                                          rank_ * vocab_rows, comm);
}

void TensorParallelStage::complete_replicated_gradients() {
  if (!config_.strategy_options.sequence_parallel || t_ == 1) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (auto& s : shards_) {
    if (s.cut != Cut::kReplicated || !s.local.requires_grad()) continue;
    // A parameter without a gradient has none on every rank (the graphs are the same).
    if (s.local.grad().defined()) grads.push_back(s.local.grad());
  }
  if (grads.empty()) return;
  auto flat = at::flatten_dense_tensors(grads);
  comm_.all_reduce(flat);
  auto pieces = at::unflatten_dense_tensors(flat, grads);
  for (size_t i = 0; i < grads.size(); ++i) grads[i].copy_(pieces[i]);
}

std::vector<torch::Tensor> TensorParallelStage::sharded() const {
  std::vector<torch::Tensor> out;
  for (const auto& s : shards_) {
    if (s.cut != Cut::kReplicated && t_ > 1) out.push_back(s.local);
  }
  return out;
}

std::vector<torch::Tensor> TensorParallelStage::replicated() const {
  std::vector<torch::Tensor> out;
  for (const auto& s : shards_) {
    if (s.cut == Cut::kReplicated || t_ == 1) out.push_back(s.local);
  }
  return out;
}

NamedTensors TensorParallelStage::gathered_weights() {
  NamedTensors out;
  for (const auto& s : shards_) out.emplace_back(s.name, uncut(s.local.detach().cpu(), s.cut));
  return out;
}

int64_t TensorParallelStage::parameter_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : shards_) bytes += s.local.nbytes();
  return bytes;
}

}  // namespace shardscope
