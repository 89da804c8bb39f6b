#pragma once

#include <cstdint>

namespace shardscope::profiling {

// Monotonic host time in nanoseconds; every host-side event shares this clock.
int64_t now_ns();

// The calling thread's CPU time in nanoseconds: what it ran, not what it waited for a core.
int64_t thread_cpu_ns();

}  // namespace shardscope::profiling
