#pragma once

#include "engine/train/config.h"
#include "engine/train/option_support.h"

namespace shardscope {

// Refuses, naming the field, a gated option `support` does not implement, and threads sharing a
// device for a strategy that blocks inside backward.
void validate_option_support(const Config& config, const OptionSupport& support);

}  // namespace shardscope
