#pragma once

#include <functional>

#include <torch/types.h>

namespace shardscope {

using TensorFunction = std::function<torch::Tensor(const torch::Tensor&)>;

// Runs fn(x) without keeping its intermediate activations; backward runs fn again (with autograd,
// under the autocast state forward had) and back-propagates through the recomputation. Gradient
// hooks on parameters fire during that inner backward, as with PyTorch's reentrant checkpoint.
torch::Tensor recompute_in_backward(TensorFunction fn, const torch::Tensor& x);

// Whether this thread is running such a recomputation now (what counts work once skips it).
bool recomputing_in_backward();

}  // namespace shardscope
