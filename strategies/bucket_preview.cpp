#include "strategies/bucket_preview.h"

#include "engine/gpt_model.h"
#include "strategies/bucket_plan.h"
#include "strategies/replicated_strategy.h"

namespace shardscope {

int gradient_bucket_count(const Config& config) {
  torch::NoGradGuard no_grad;
  GptModel model(config.model, config.seed);
  std::vector<torch::Tensor> trainable;
  for (const auto& [name, p] : model->named_params()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  return static_cast<int>(
      plan_buckets(trainable, ReplicatedStrategy::bucket_cap_bytes(config)).size());
}

}  // namespace shardscope
