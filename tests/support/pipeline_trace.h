#pragma once

#include <cstdint>

#include "profiling/trace/trace.h"

namespace shardscope::test {

// A GPipe run of `stages` equal stages and `micro` micro-batches, built by hand: every forward
// takes `forward_ns` and every backward `backward_ns`, stage s runs micro-batch j's forward at
// (s + j) forward times and the backwards in the mirror order, so each stage computes m(F + B)
// of a window of (m + p - 1)(F + B) and its bubble is exactly (p - 1) / (m + p - 1). Steps are
// numbered from `first_step` (a resumed run's) and follow each other with `gap_ns` between.
// The run's description names a pp run with that many stages and micro-batches.
profiling::Trace gpipe_trace(int stages, int micro, int steps, int first_step,
                             int64_t forward_ns = 1000, int64_t backward_ns = 2000,
                             int64_t gap_ns = 500);

}  // namespace shardscope::test
