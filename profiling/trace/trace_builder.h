#pragma once

#include <string>
#include <vector>

#include "profiling/record/rank_event_log.h"
#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// Turns what each rank recorded into the trace model: host spans and waits on the host lane,
// every communication call on the comm lane (issue to completion), memory samples as counters.
// Activations are derived: allocated bytes beyond what the strategy holds, at each allocation
// sample. Open spans (a rank that failed mid-step) are closed at the rank's last timestamp.
// `failures` (rank -> message, may be empty) marks failed ranks.
Trace build_trace(const RunRecord& run, const std::vector<const RankEventLog*>& logs,
                  const std::vector<std::string>& failures = {});

}  // namespace shardscope::profiling
