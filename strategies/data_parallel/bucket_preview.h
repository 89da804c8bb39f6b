#pragma once

#include "engine/train/config.h"

namespace shardscope {

// How many gradient buckets a bucketed data-parallel strategy cuts `config`'s model into at its
// bucket cap: the plan the strategies use (plan_buckets over the trainable parameters, at
// bucket_cap_bytes), without training. One bucket means the gradients are
// all-reduced at the end of backward, with nothing left to overlap; the Launch form warns.
// Builds the model on the CPU (its parameters, not its initial values' file): call it when the
// model or the cap changes, not every frame.
int gradient_bucket_count(const Config& config);

}  // namespace shardscope
