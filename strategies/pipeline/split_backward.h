#pragma once

#include <memory>
#include <vector>

#include <torch/types.h>

namespace shardscope {

// A stage's backward in two passes, as the zero-bubble schedules need (Qi et al., 2023): the
// input pass computes only the gradient of the stage's input (what the previous stage waits
// for), the weight pass later only the weights' gradients. The weight pass restarts the graph at
// the nodes where the input's path meets each weight's (a linear's matmul, a LayerNorm), with
// the gradients those nodes received in the input pass, and asks the engine for the weights
// alone: it costs the weight-gradient matmuls, not a second backward. The same cut as
// torch.distributed.pipelining's stage_backward_input / stage_backward_weight.
class SplitBackward {
 public:
  // Returns d(output)/d(input) for `output_grad`, and keeps what the weight pass needs (the graph
  // stays alive until then: these are the activations a split backward holds longer).
  torch::Tensor input_pass(const torch::Tensor& output, const torch::Tensor& output_grad,
                           const torch::Tensor& input, const std::vector<torch::Tensor>& weights);
  // Accumulates the weights' gradients into their .grad and releases the graph.
  void weight_pass();

 private:
  struct Group;
  std::vector<std::shared_ptr<Group>> groups_;
};

}  // namespace shardscope
