#include "strategies/tensor/tensor_parallel.h"

#include <torch/autograd.h>
#include <torch/nn/functional/embedding.h>
#include <torch/nn/functional/linear.h>
#include <torch/torch.h>

#include "engine/comm/comm.h"

namespace shardscope::tp {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group outlives every graph built on it; autograd keeps only this handle.
int64_t handle(Comm& comm) {
  return reinterpret_cast<int64_t>(&comm);
}
Comm& comm_of(AutogradContext* ctx) {
  return *reinterpret_cast<Comm*>(ctx->saved_data["comm"].toInt());
}

torch::Tensor all_reduced(const torch::Tensor& x, Comm& comm,
                          c10d::ReduceOp op = c10d::ReduceOp::SUM) {
  torch::Tensor out = x.contiguous().clone();
  comm.all_reduce(out, op);
  return out;
}

struct CopyToRegion : torch::autograd::Function<CopyToRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_reduced(grads[0], comm_of(ctx)), torch::Tensor()};
  }
};

struct ReduceFromRegion : torch::autograd::Function<ReduceFromRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t comm) {
    return all_reduced(x, *reinterpret_cast<Comm*>(comm));
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], torch::Tensor()};
  }
};

struct GatherLastDim : torch::autograd::Function<GatherLastDim> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t handle) {
    Comm& comm = *reinterpret_cast<Comm*>(handle);
    ctx->saved_data["width"] = x.size(-1);
    ctx->saved_data["rank"] = static_cast<int64_t>(comm.rank());
    // [t, ..., k] -> [..., t, k] -> [..., t*k]
    auto stacked = all_gather_stacked(x, comm).movedim(0, -2).contiguous();
    std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
    out_shape.back() *= comm.size();
    return stacked.view(out_shape);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t width = ctx->saved_data["width"].toInt();
    const int64_t rank = ctx->saved_data["rank"].toInt();
    return {grads[0].narrow(-1, rank * width, width).contiguous(), torch::Tensor()};
  }
};

// [B, T, ...] as t blocks of [B, T/t, ...] laid out rank after rank, as flat collectives want.
torch::Tensor sequence_blocks(const torch::Tensor& x, int parts) {
  std::vector<int64_t> shape{x.size(0), parts, x.size(1) / parts};
  for (int64_t d = 2; d < x.dim(); ++d) shape.push_back(x.size(d));
  return x.reshape(shape).transpose(0, 1).contiguous().view({-1});
}

// The sequence whole again from `gathered`, every rank's shard of `shard_sizes` rank after rank
// ([t, B, T/t, ...] flat, as all_gather_into leaves them).
torch::Tensor sequence_of_gathered(const torch::Tensor& gathered, at::IntArrayRef shard_sizes,
                                   int parts) {
  std::vector<int64_t> stacked{parts};
  stacked.insert(stacked.end(), shard_sizes.begin(), shard_sizes.end());
  auto blocks = gathered.view(stacked).transpose(0, 1).contiguous();  // [B, t, T/t, ...]
  std::vector<int64_t> out(shard_sizes.begin(), shard_sizes.end());
  out[1] *= parts;
  return blocks.view(out);
}

torch::Tensor all_gather_sequence(const torch::Tensor& x, Comm& comm) {
  return sequence_of_gathered(all_gather_stacked(x, comm), x.sizes(), comm.size());
}

torch::Tensor reduce_scatter_sequence_now(const torch::Tensor& x, Comm& comm) {
  auto flat = sequence_blocks(x, comm.size());
  auto mine = torch::empty({flat.numel() / comm.size()}, x.options());
  comm.reduce_scatter_tensor(mine, flat);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape[1] /= comm.size();
  return mine.view(shape);
}

struct GatherSequence : torch::autograd::Function<GatherSequence> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return all_gather_sequence(x, *reinterpret_cast<Comm*>(comm));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {reduce_scatter_sequence_now(grads[0], comm_of(ctx)), torch::Tensor()};
  }
};

struct ReduceScatterSequence : torch::autograd::Function<ReduceScatterSequence> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return reduce_scatter_sequence_now(x, *reinterpret_cast<Comm*>(comm));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_gather_sequence(grads[0], comm_of(ctx)), torch::Tensor()};
  }
};

// Megatron's column-parallel Linear under sequence parallelism: it gathers its input's sequence
// shards and multiplies, as gather_sequence and F::linear do, but keeps for backward only this
// rank's shard, in the dtype the product computed in (bf16 under autocast), and gathers it again
// for the weight's gradient. t times fewer bytes kept, for one more all-gather a Linear. The
// input's gradient (with its reduce-scatter) and the weight's are computed only when asked, so a
// split backward's input pass gathers nothing and its weight pass scatters nothing. When both are,
// the gather runs while the input's gradient is computed, as Megatron overlaps them.
struct SequenceParallelLinear : torch::autograd::Function<SequenceParallelLinear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias,
                               int64_t comm) {
    const torch::Tensor y = torch::nn::functional::linear(
        all_gather_sequence(x, *reinterpret_cast<Comm*>(comm)), weight, bias);
    // The shard as the product read it: autocast's cast of the gathered input, elementwise.
    ctx->save_for_backward({x.to(y.scalar_type()), weight, bias});
    ctx->saved_data["comm"] = comm;
    ctx->saved_data["input_dtype"] = static_cast<int64_t>(x.scalar_type());
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &kept = saved[0], &weight = saved[1], &bias = saved[2];
    Comm& comm = comm_of(ctx);
    const torch::Tensor& grad = grads[0];
    const int64_t out_features = weight.size(0), in_features = weight.size(1);
    const torch::Tensor g2 = grad.reshape({-1, out_features});
    torch::Tensor grad_x, grad_weight, grad_bias;
    torch::Tensor gathered;
    CommWork gathering;
    if (ctx->needs_input_grad(1)) {
      gathered = torch::empty({comm.size() * kept.numel()}, kept.options());
      gathering = comm.all_gather_into_async(gathered, kept.contiguous().view({-1}));
    }
    // As autograd differentiates F::linear's matmul on [N, in] x [in, out]: the input's gradient
    // g W, the weight's (x^T g)^T, the bias's g summed over the tokens.
    if (ctx->needs_input_grad(0)) {
      const auto input_dtype = static_cast<c10::ScalarType>(ctx->saved_data["input_dtype"].toInt());
      std::vector<int64_t> shape(kept.sizes().begin(), kept.sizes().end());
      shape[1] *= comm.size();
      const torch::Tensor w = weight.to(grad.scalar_type());
      grad_x = reduce_scatter_sequence_now(g2.mm(w).view(shape).to(input_dtype), comm);
    }
    if (ctx->needs_input_grad(1)) {
      gathering.wait();
      const torch::Tensor total =
          sequence_of_gathered(gathered, kept.sizes(), comm.size()).reshape({-1, in_features});
      grad_weight = total.t().mm(g2).t().to(weight.scalar_type());
    }
    if (bias.defined() && ctx->needs_input_grad(2))
      grad_bias = grad.sum(std::vector<int64_t>{0, 1}).to(bias.scalar_type());
    return {grad_x, grad_weight, grad_bias, torch::Tensor()};
  }
};

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits_shard,
                               const torch::Tensor& targets, int64_t vocab_begin, int64_t handle) {
    Comm& comm = *reinterpret_cast<Comm*>(handle);
    auto logits = logits_shard.to(torch::kFloat);
    const int64_t width = logits.size(1);
    auto max = all_reduced(std::get<0>(logits.max(1)), comm, c10d::ReduceOp::MAX);
    auto shifted = logits - max.unsqueeze(1);
    auto exp = shifted.exp();
    auto sum_exp = all_reduced(exp.sum(1), comm);
    auto outside = (targets < vocab_begin) | (targets >= vocab_begin + width);
    auto local = (targets - vocab_begin).masked_fill(outside, 0);
    auto target_logit = shifted.gather(1, local.unsqueeze(1)).squeeze(1).masked_fill(outside, 0);
    target_logit = all_reduced(target_logit, comm);
    ctx->save_for_backward({exp / sum_exp.unsqueeze(1), local, outside});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits_shard.scalar_type());
    return (sum_exp.log() - target_logit).mean();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto grad = saved[0].clone();  // softmax over the whole vocabulary, this rank's columns
    const auto& local = saved[1];
    const auto& outside = saved[2];
    // d(loss)/d(logit) = softmax - one_hot(target), and the target is in one rank's columns.
    grad.scatter_add_(1, local.unsqueeze(1), -(~outside).to(grad.dtype()).unsqueeze(1));
    grad.mul_(grads[0] / static_cast<double>(grad.size(0)));
    const auto dtype = static_cast<c10::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor all_gather_stacked(const torch::Tensor& x, Comm& comm) {
  auto flat = torch::empty({comm.size() * x.numel()}, x.options());
  comm.all_gather_into(flat, x.contiguous().view({-1}));
  std::vector<int64_t> shape{comm.size()};
  for (int64_t d : x.sizes()) shape.push_back(d);
  return flat.view(shape);
}

torch::Tensor copy_to_region(const torch::Tensor& x, Comm& comm) {
  return CopyToRegion::apply(x, handle(comm));
}

torch::Tensor reduce_from_region(const torch::Tensor& x, Comm& comm) {
  return ReduceFromRegion::apply(x, handle(comm));
}

torch::Tensor gather_last_dim(const torch::Tensor& x, Comm& comm) {
  return GatherLastDim::apply(x, handle(comm));
}

torch::Tensor sequence_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight,
                                       const torch::Tensor& bias, Comm& comm) {
  return SequenceParallelLinear::apply(x, weight, bias, handle(comm));
}

torch::Tensor gather_sequence(const torch::Tensor& x, Comm& comm) {
  return GatherSequence::apply(x, handle(comm));
}

torch::Tensor reduce_scatter_sequence(const torch::Tensor& x, Comm& comm) {
  return ReduceScatterSequence::apply(x, handle(comm));
}

torch::Tensor shard_of(const torch::Tensor& full, int64_t dim, int part, int parts) {
  const int64_t size = full.size(dim) / parts;
  return full.narrow(dim, part * size, size).clone();
}

torch::Tensor column_parallel_linear(const torch::Tensor& x, const torch::Tensor& weight_shard,
                                     const torch::Tensor& bias_shard, Comm& comm) {
  return torch::nn::functional::linear(copy_to_region(x, comm), weight_shard, bias_shard);
}

torch::Tensor row_parallel_linear(const torch::Tensor& x_shard, const torch::Tensor& weight_shard,
                                  const torch::Tensor& bias, Comm& comm) {
  auto y = reduce_from_region(torch::nn::functional::linear(x_shard, weight_shard), comm);
  return bias.defined() ? y + bias : y;
}

torch::Tensor vocab_parallel_lookup(const torch::Tensor& tokens, const torch::Tensor& weight_shard,
                                    int64_t vocab_begin) {
  const int64_t rows = weight_shard.size(0);
  auto outside = (tokens < vocab_begin) | (tokens >= vocab_begin + rows);
  auto local = (tokens - vocab_begin).masked_fill(outside, 0);
  return torch::nn::functional::embedding(local, weight_shard) *
         (~outside).unsqueeze(-1).to(weight_shard.dtype());
}

torch::Tensor vocab_parallel_embedding(const torch::Tensor& tokens,
                                       const torch::Tensor& weight_shard, int64_t vocab_begin,
                                       Comm& comm) {
  return reduce_from_region(vocab_parallel_lookup(tokens, weight_shard, vocab_begin), comm);
}

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits_shard,
                                           const torch::Tensor& targets, int64_t vocab_begin,
                                           Comm& comm) {
  return VocabParallelCrossEntropy::apply(logits_shard, targets, vocab_begin, handle(comm));
}

}  // namespace shardscope::tp
