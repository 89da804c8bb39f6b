#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "engine/launch/launcher.h"

namespace shardscope {

// Runs one rank on the calling thread, whether the rank is a thread of this process or the
// process itself: sets its intra-op threads, tracing and per-rank allocation tracking (when the
// spec traces; `log` receives what it records), connects its process group over `store`, waits
// until every rank is connected, and calls `body`. Sub-groups are created on demand. Returns
// the rank's failure, stamped where it was thrown; its groups are torn down by then, which wakes
// peers blocked on it.
std::optional<RankFailure> run_rank(const LaunchSpec& spec, int rank,
                                    const c10::intrusive_ptr<c10d::Store>& store,
                                    profiling::RankEventLog* log, int64_t& peak_allocated_bytes,
                                    const std::function<void(RankContext&)>& body);

}  // namespace shardscope
