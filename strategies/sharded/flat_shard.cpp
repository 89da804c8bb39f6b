#include "strategies/sharded/flat_shard.h"

#include <algorithm>

#include <torch/torch.h>

#include "engine/comm/comm.h"

namespace shardscope {

FlatShard::FlatShard(std::vector<torch::Tensor> params, int rank, int world)
    : params_(std::move(params)), rank_(rank), world_(world) {
  for (const auto& p : params_) {
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  padded_ = (numel_ + world - 1) / world * world;
  const int64_t begin = shard_begin(), end = begin + shard_numel();
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t lo = std::max(begin, offsets_[i]);
    const int64_t hi = std::min(end, offsets_[i] + params_[i].numel());
    if (lo < hi) pieces_.push_back({i, lo - offsets_[i], lo - begin, hi - lo});
  }
}

void FlatShard::gather_gradients(torch::Tensor& flat) const {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto slot = flat.narrow(0, offsets_[i], params_[i].numel());
    const auto& grad = params_[i].grad();
    if (grad.defined()) {
      slot.copy_(grad.reshape({-1}));
    } else {
      slot.zero_();
    }
  }
  if (padded_ > numel_) flat.narrow(0, numel_, padded_ - numel_).zero_();
}

torch::Tensor FlatShard::own_values() const {
  torch::NoGradGuard no_grad;
  auto slice = torch::zeros({shard_numel()}, params_.front().options().requires_grad(false));
  for (const auto& piece : pieces_) {
    slice.narrow(0, piece.shard_offset, piece.length)
        .copy_(params_[piece.param].detach().reshape({-1}).narrow(0, piece.param_offset,
                                                                  piece.length));
  }
  return slice;
}

void FlatShard::scatter_values(const torch::Tensor& flat) const {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    // variable_data(): same storage, own version counter, so autograd graphs that saved the
    // parameter do not see an in-place change.
    params_[i].variable_data().view({-1}).copy_(flat.narrow(0, offsets_[i], params_[i].numel()));
  }
}

double clip_sharded_gradients(Comm& comm, const std::vector<torch::Tensor>& slices, double max_norm,
                              const std::vector<torch::Tensor>& replicated,
                              const std::vector<torch::Tensor>& uncounted) {
  torch::NoGradGuard no_grad;
  auto squares = [](const std::vector<torch::Tensor>& tensors) {
    auto sum = torch::zeros({1}, torch::kDouble);
    for (const auto& t : tensors) {
      if (t.grad().defined()) sum += t.grad().to(torch::kDouble).pow(2).sum().cpu();
    }
    return sum;
  };
  auto sum_sq = squares(slices);
  comm.all_reduce(sum_sq);
  const double norm = std::sqrt((sum_sq + squares(replicated)).item<double>());
  const double coef = max_norm / (norm + 1e-6);  // as torch.nn.utils.clip_grad_norm_
  if (coef < 1.0) {
    for (const auto* group : {&slices, &replicated, &uncounted}) {
      for (const auto& t : *group) {
        if (t.grad().defined()) t.mutable_grad().mul_(coef);
      }
    }
  }
  return norm;
}

std::vector<bool> true_on_any_rank(Comm& comm, const std::vector<bool>& mine) {
  auto bitmap = torch::zeros({static_cast<int64_t>(mine.size())}, torch::kInt);
  for (size_t i = 0; i < mine.size(); ++i) bitmap[i] = mine[i] ? 1 : 0;
  comm.all_reduce(bitmap);
  std::vector<bool> any(mine.size());
  for (size_t i = 0; i < any.size(); ++i) any[i] = bitmap[i].item<int>() > 0;
  return any;
}

}  // namespace shardscope
