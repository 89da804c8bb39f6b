#pragma once

#include <cstdint>

namespace shardscope::profiling {

// Monotonic host time in nanoseconds; every host-side event shares this clock.
int64_t now_ns();

}  // namespace shardscope::profiling
