#pragma once

#include <cstddef>

#include "profiling/trace/trace.h"

namespace shardscope::perf {

// A trace at the scale the GUI must handle: `events` events over 8 ranks, host spans nested in
// steps, collectives on the communication lane with sequence numbers linking ranks, memory
// counters. Deterministic.
profiling::Trace synthetic_trace(size_t events);

}  // namespace shardscope::perf
