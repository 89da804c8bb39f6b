#pragma once

#include "engine/config.h"

namespace shardscope {

// Which of the family-wide strategy options a strategy implements; asking a strategy for one it
// does not implement is a configuration error naming the option, not a silent no-op.
struct OptionSupport {
  bool reduce_dtype = false;             // gradients can travel in bf16
  bool offload = false;                  // ZeRO-Offload of optimizer state
  bool activation_checkpointing = true;  // per-block recomputation in backward
};

void validate_option_support(const Config& config, const OptionSupport& support);

}  // namespace shardscope
