#pragma once

#include <cstdint>

namespace shardscope {

// The gradient bucket cap: `bucket_mb` MiB when given (> 0); else DDP's 25 MiB, brought down to a
// quarter of the gradients of a model small enough that 25 MiB would hold them in one or two
// buckets. One bucket can only be reduced after the whole backward: nothing would overlap. (The
// same reason PyTorch keeps DDP's first bucket small.) So every preset gets at least 3 buckets.
// Free of LibTorch: the projection of a run that never happens sizes its buckets with it.
int64_t bucket_cap_bytes(double bucket_mb, int64_t gradient_bytes);

}  // namespace shardscope
