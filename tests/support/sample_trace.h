#pragma once

#include "profiling/trace/trace.h"

namespace shardscope::test {

// Two ranks, host and comm lanes, nested host spans, a matched all_reduce and all_gather, a
// send/recv pair, memory counters, and a failure on rank 1.
profiling::Trace sample_trace();

// Field-by-field equality of two traces (strings compared by value, not by id).
void expect_same_trace(const profiling::Trace& a, const profiling::Trace& b);

}  // namespace shardscope::test
