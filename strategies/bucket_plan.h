#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace shardscope {

// Parameter indices grouped into buckets of at least `cap_bytes` (the last may be smaller), in
// reverse registration order: roughly the order backward produces gradients, as DDP does.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<torch::Tensor>& params,
                                              int64_t cap_bytes);

}  // namespace shardscope
