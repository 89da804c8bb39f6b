#pragma once

#include <torch/types.h>

namespace shardscope {

// Token ids [batch, seq] and the next-token targets of the same shape.
struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
};

}  // namespace shardscope
