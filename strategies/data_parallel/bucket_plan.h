#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace shardscope {

// The gradient bucket cap: `bucket_mb` MiB when given (> 0); else DDP's 25 MiB, brought down to a
// quarter of the gradients of a model small enough that 25 MiB would hold them in one or two
// buckets. One bucket can only be reduced after the whole backward: nothing would overlap. (The
// same reason PyTorch keeps DDP's first bucket small.) So every preset gets at least 3 buckets.
int64_t bucket_cap_bytes(double bucket_mb, int64_t gradient_bytes);
// Bytes of the gradients `params` get (those that require one).
int64_t gradient_bytes(const std::vector<torch::Tensor>& params);

// Parameter indices grouped into buckets of at least `cap_bytes` (the last may be smaller), in
// reverse registration order: roughly the order backward produces gradients, as DDP does.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<torch::Tensor>& params,
                                              int64_t cap_bytes);

}  // namespace shardscope
