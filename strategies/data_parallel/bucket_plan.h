#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "strategies/data_parallel/bucket_cap.h"

namespace shardscope {

// Bytes of the gradients `params` get (those that require one).
int64_t gradient_bytes(const std::vector<torch::Tensor>& params);

// Parameter indices grouped into buckets of at least `cap_bytes` (the last may be smaller), in
// reverse registration order: roughly the order backward produces gradients, as DDP does.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<torch::Tensor>& params,
                                              int64_t cap_bytes);

}  // namespace shardscope
