#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "engine/train/config.h"

namespace shardscope {

// While alive, and when the options ask for bf16, runs eligible operations (matrix products,
// attention) in bf16 on `device` while parameters, gradients and the optimizer stay fp32:
// autocast, as torch.autocast does. Construct it around the forward only.
class ComputePrecisionScope {
 public:
  ComputePrecisionScope(const StrategyOptions& options, c10::DeviceType device);
  ~ComputePrecisionScope();
  ComputePrecisionScope(const ComputePrecisionScope&) = delete;
  ComputePrecisionScope& operator=(const ComputePrecisionScope&) = delete;

 private:
  c10::DeviceType device_;
  bool active_ = false;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_ = c10::kBFloat16;
};

// The dtype gradients travel in through collectives.
c10::ScalarType gradient_reduce_dtype(const StrategyOptions& options);

}  // namespace shardscope
