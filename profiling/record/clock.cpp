#include "profiling/record/clock.h"

#include <chrono>

namespace shardscope::profiling {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace shardscope::profiling
