#include "engine/model/mixed_precision.h"

#include <ATen/autocast_mode.h>

namespace shardscope {

ComputePrecisionScope::ComputePrecisionScope(const StrategyOptions& options, c10::DeviceType device)
    : device_(device), active_(options.precision == "bf16") {
  if (!active_) return;
  was_enabled_ = at::autocast::is_autocast_enabled(device_);
  was_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, c10::kBFloat16);
  at::autocast::increment_nesting();
}

ComputePrecisionScope::~ComputePrecisionScope() {
  if (!active_) return;
  at::autocast::set_autocast_enabled(device_, was_enabled_);
  at::autocast::set_autocast_dtype(device_, was_dtype_);
  // The weight casts autocast cached for this forward are dropped once the outermost scope ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
}

bool shares_weight_casts(const StrategyOptions& options) {
  return options.precision == "bf16" && !options.activation_checkpointing;
}

c10::ScalarType gradient_reduce_dtype(const StrategyOptions& options) {
  return options.reduce_dtype == "bf16" ? c10::kBFloat16 : c10::kFloat;
}

}  // namespace shardscope
