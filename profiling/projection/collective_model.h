#pragma once

#include <cstdint>
#include <string>

#include "profiling/projection/hardware_profile.h"

namespace shardscope::profiling {

// What one collective costs on a profile, after NCCL's own tuning model (src/graph/tuning.cc):
// time = launch + base(protocol) + steps x hwLatency(link, protocol) + wire bytes / bandwidth,
// where a ring all_reduce takes 2(n-1) steps and moves 2(n-1)/n of the buffer through each GPU,
// all_gather / reduce_scatter n-1 steps and (n-1)/n, broadcast / reduce n-1 steps and all of it;
// a tree all_reduce inside a node is a chain (2(n-1) steps, twice the buffer), so on one node
// the ring always wins, as NCCL finds. The fastest protocol is taken (LL moves
// half the bandwidth, LL128 120/128 of it). Across nodes the collective is hierarchical: inside
// each node, then between nodes on each GPU's own network rail, then inside again.
struct CollectiveEstimate {
  std::string op;
  int64_t bytes = 0;  // nccl-tests' S: the whole buffer (all_gather: the gathered result)
  int ranks = 0;
  std::string algorithm;  // ring, tree, or hierarchical
  Protocol protocol = Protocol::kSimple;
  double time_s = 0;
  double algbw_gbps = 0;  // S / time
  double busbw_gbps = 0;  // algbw x the op's factor (busbw_factor in trace_metrics.h)
};

// `algorithm`: ring, tree (all_reduce only) or auto (the faster). Throws std::invalid_argument
// for an unknown op or algorithm, or more ranks than the profile has GPUs.
CollectiveEstimate estimate_collective(const std::string& op, int64_t bytes, int ranks,
                                       const HardwareProfile& hw,
                                       const std::string& algorithm = "auto");

// "1GiB", "256MB", "4KiB", "1000" -> bytes; throws std::invalid_argument otherwise.
int64_t parse_bytes(const std::string& text);

}  // namespace shardscope::profiling
