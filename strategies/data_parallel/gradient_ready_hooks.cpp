#include "strategies/data_parallel/gradient_ready_hooks.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "profiling/record/memory_tags.h"

namespace shardscope {

void GradientReadyHooks::attach(const std::vector<torch::Tensor>& params,
                                std::function<void(size_t)> ready) {
  auto shared_ready = std::make_shared<std::function<void(size_t)>>(std::move(ready));
  for (size_t i = 0; i < params.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params[i]);
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [shared_ready, i, param = params[i]](const torch::autograd::variable_list& outputs,
                                             const torch::autograd::variable_list&) {
          // Named before the strategy moves it anywhere: at a peak inside backward it counts as
          // what it is.
          profiling::tag_memory(param.grad(), profiling::MemoryKind::kGradients);
          (*shared_ready)(i);
          return outputs;
        }));
    accumulators_.push_back(std::move(accumulator));
  }
}

}  // namespace shardscope
