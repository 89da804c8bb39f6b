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

// Whether the micro-batches of a step share one bf16 copy of each weight (made by the step's first
// forward), as Megatron's micro-batches share its bf16 weights, instead of each forward casting
// the fp32 weights again and saving its own copy for backward: a pipeline stage holding k
// micro-batches in flight then keeps one copy, not k. Our pipelines do (TensorParallelStage::
// share_weight_casts) under bf16 compute, but not with activation checkpointing, whose no-grad
// forward must not make the copy its recomputation would use.
bool shares_weight_casts(const StrategyOptions& options);

// The dtype gradients travel in through collectives.
c10::ScalarType gradient_reduce_dtype(const StrategyOptions& options);

}  // namespace shardscope
