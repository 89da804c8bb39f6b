#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include <torch/types.h>

namespace torch::autograd {
struct Node;
}

namespace shardscope {

// Calls `ready(i)` each time parameter i's gradient has been fully accumulated into .grad during
// a backward pass (after every use of the parameter contributed), the moment DDP-style
// strategies may start communicating it. Same mechanism as c10d::Reducer: a post-hook on each
// parameter's gradient accumulator, which is kept alive here.
class GradientReadyHooks {
 public:
  void attach(const std::vector<torch::Tensor>& params, std::function<void(size_t)> ready);

 private:
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace shardscope
