#pragma once

#include <string>

namespace shardscope {

// How fast the device that measures a run multiplies matrices (TFLOP/s: fp32 on the CPU, bf16 on
// a GPU), so that a trace can be re-timed onto another device later (its compute scale) without
// anyone running `shardscope calibrate`. Measured once per machine and device kind (a fraction of
// a second) and cached in $SHARDSCOPE_CACHE, else $XDG_CACHE_HOME/shardscope, else
// ~/.cache/shardscope; a cache that cannot be written only means measuring again next time.
double device_matmul_tflops(const std::string& device);

// The folder the cache lives in (it need not exist).
std::string shardscope_cache_directory();

}  // namespace shardscope
