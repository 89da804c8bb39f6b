#include "strategies/data_parallel/gradient_buckets.h"

#include <algorithm>

#include <torch/torch.h>

#include "profiling/record/memory_tags.h"
#include "strategies/data_parallel/bucket_plan.h"

namespace shardscope {

GradientBuckets::GradientBuckets(std::vector<torch::Tensor> params, Comm& comm, int64_t cap_bytes,
                                 c10::ScalarType dtype, bool overlap)
    : params_(std::move(params)), comm_(comm), overlap_(overlap) {
  bucket_of_.assign(params_.size(), 0);
  for (auto& members : plan_buckets(params_, cap_bytes)) {
    Bucket bucket;
    int64_t elements = 0;
    for (size_t i : members) {
      bucket.offsets.push_back(elements);
      bucket_of_[i] = buckets_.size();
      elements += params_[i].numel();
    }
    bucket.params = std::move(members);
    // Gradient storage that outlives each step's .grad: gradients, for the lesson (see
    // ReducerSync).
    profiling::MemoryTag tag(profiling::MemoryKind::kGradients);
    bucket.buffer = torch::zeros({elements}, params_[bucket.params.front()].options().dtype(dtype));
    bucket.pending = bucket.params.size();
    buckets_.push_back(std::move(bucket));
  }
}

void GradientBuckets::ready(size_t i) {
  Bucket& bucket = fill(i);
  if (--bucket.pending == 0 && overlap_) launch(bucket);
}

void GradientBuckets::finish(const std::vector<bool>& was_ready, const std::vector<bool>& used) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!was_ready[i]) --fill(i).pending;  // zeros from this rank
  }
  for (auto& bucket : buckets_) {
    if (!bucket.launched) launch(bucket);  // overlap off, or held back by an unused parameter
  }
  for (auto& bucket : buckets_) {
    bucket.work.wait();
    bucket.work = CommWork();  // nothing of a finished reduction is kept into the next step
    for (size_t k = 0; k < bucket.params.size(); ++k) {
      torch::Tensor& param = params_[bucket.params[k]];
      if (!used[bucket.params[k]]) {
        param.mutable_grad() = torch::Tensor();
        continue;
      }
      param.mutable_grad().copy_(
          bucket.buffer.narrow(0, bucket.offsets[k], param.numel()).view_as(param));
    }
    bucket.launched = false;
    bucket.pending = bucket.params.size();
  }
}

int64_t GradientBuckets::buffer_bytes() const {
  int64_t bytes = 0;
  for (const auto& bucket : buckets_) bytes += bucket.buffer.nbytes();
  return bytes;
}

GradientBuckets::Bucket& GradientBuckets::fill(size_t i) {
  torch::NoGradGuard no_grad;
  Bucket& bucket = buckets_[bucket_of_[i]];
  const auto k = static_cast<size_t>(std::find(bucket.params.begin(), bucket.params.end(), i) -
                                     bucket.params.begin());
  torch::Tensor& param = params_[i];
  torch::Tensor& grad = param.mutable_grad();
  if (!grad.defined()) {
    grad = torch::zeros_like(param);
    profiling::tag_memory(grad, profiling::MemoryKind::kGradients);
  }
  bucket.buffer.narrow(0, bucket.offsets[k], param.numel()).copy_(grad.reshape({-1}));
  return bucket;
}

void GradientBuckets::launch(Bucket& bucket) {
  bucket.buffer.div_(comm_.size());
  bucket.work = comm_.all_reduce_async(bucket.buffer);
  bucket.launched = true;
}

}  // namespace shardscope
