#include "strategies/data_parallel/bucket_preview.h"

#include "engine/model/gpt_model.h"
#include "strategies/data_parallel/bucket_plan.h"

namespace shardscope {

int gradient_bucket_count(const Config& config) {
  torch::NoGradGuard no_grad;
  GptModel model(config.model, config.seed);
  std::vector<torch::Tensor> trainable;
  for (const auto& [name, p] : model->named_params()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  const int64_t cap =
      bucket_cap_bytes(config.strategy_options.bucket_mb, gradient_bytes(trainable));
  return static_cast<int>(plan_buckets(trainable, cap).size());
}

}  // namespace shardscope
