#pragma once

#include <string>

#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// Whether this build writes Chakra execution traces (it needs Debian's protobuf).
bool chakra_export_built();

// One rank of the trace as an MLCommons Chakra execution trace (ASTRA-sim's input): the
// length-prefixed protobuf stream of Chakra's et_def.proto, a GlobalMetadata then one Node a
// message. Nodes, in the order they started:
// - compute: the rank's device kernels and copies where it has any (a GPU run), else its host
//   forward, backward and optimizer spans that hold no other (COMP_NODE, duration_micros);
// - each collective (COMM_COLL_NODE: comm_type, comm_size in bytes, pg_name);
// - each send and receive (COMM_SEND_NODE / COMM_RECV_NODE: comm_src, comm_dst, comm_size and
//   comm_tag, the pair's sequence number, so a send and its receive carry the same tag).
// A node's ctrl_deps is the node before it on its lane (a thread or a stream runs in order); its
// data_deps is the latest node of the other kind that ended before it started: the compute that
// produced what a collective sends, or the communication a compute waited for.
// Throws std::runtime_error where the build has no protobuf (chakra_export_built()).
std::string to_chakra_et(const Trace& trace, const RankTrace& rank);

// "rank-3.et": the name of a rank's Chakra file in a trace directory.
std::string chakra_file_name(int rank);

}  // namespace shardscope::profiling
