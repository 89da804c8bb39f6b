#pragma once

#include <cstdint>
#include <vector>

#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// Two ranks' slices of one communication call: what a flow arrow joins. Indices are into
// Trace::ranks and that rank's events.
struct CommLink {
  uint32_t from_rank = 0;
  uint32_t from_event = 0;
  uint32_t to_rank = 0;
  uint32_t to_event = 0;
  bool point_to_point = false;
};

// Every call linked across the ranks that made it. A collective is the same (group, sequence
// number, op) on each member; it is joined as a star, from its root for rooted collectives
// (broadcast, reduce, gather, scatter: `peer` is the root) and from the rank that issued it
// first for the others. A send is joined to the recv with the same group, ranks and per-peer
// sequence number. Calls no other rank recorded (a failed peer) stay unlinked.
std::vector<CommLink> link_communication(const Trace& trace);

}  // namespace shardscope::profiling
