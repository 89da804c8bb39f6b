#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// Holistic Trace Analysis definitions, per rank and step. Compute is the union of compute
// events (forward, backward, kernels) less the host's waits inside them (for a peer, or for a
// turn on the device: a blocked host computes nothing); communication the union of collectives
// (issue to completion); overlap = |compute ∩ communication|, exposed = |communication \ compute|,
// idle = span - |compute ∪ communication|, span = last end - first start of the step's events.
struct StepMetrics {
  int rank = 0;
  int step = 0;
  int64_t span_ns = 0;
  int64_t compute_ns = 0;
  int64_t comm_ns = 0;
  int64_t overlap_ns = 0;
  int64_t exposed_comm_ns = 0;  // less peer_wait_ns
  // A send or receive's time before its other end was issued (a pipeline stage waiting for its
  // neighbour's pass), and in a pipeline a collective's that spans stages before its last member
  // arrived, where no compute hides it: the bubble (bubble_fraction counts it), not
  // communication that costs time, so it is not in exposed_comm_ns. It stays in comm_ns and
  // overlap_ns, which are Holistic Trace Analysis's.
  int64_t peer_wait_ns = 0;
  int64_t idle_ns = 0;
  // The step's pipeline window, from the first micro-batch span of any rank to the end of the
  // last one (forward and backward of the micro-batches, where a pipeline's stages wait for
  // each other until the flush): its length and this rank's compute within it (its passes, and
  // an optimizer step run while later stages still drain). The pipeline bubble is the rest:
  // 1 - micro_compute / micro_span.
  int64_t micro_span_ns = 0;
  int64_t micro_compute_ns = 0;
  double overlap_fraction() const { return comm_ns > 0 ? double(overlap_ns) / comm_ns : 0.0; }
  double bubble_fraction() const {
    return micro_span_ns > 0 ? 1.0 - double(micro_compute_ns) / micro_span_ns : 0.0;
  }
};
std::vector<StepMetrics> step_metrics(const Trace& trace);

// Whether `e` is a collective of a group smaller than the world and not a send or receive: a
// tensor (or data-parallel) group's, among ranks of one pipeline stage. Waiting on it is not
// pipeline bubble; waiting on another stage (a receive, a collective of the whole world) is.
bool is_collective_within_a_stage(const Trace& trace, const Event& e);

// The same definitions over any stretch of time [t0, t1] (a range the user measures on the
// timeline), per rank: compute, communication, and the communication no compute hides.
struct RangeMetrics {
  int rank = 0;
  int64_t compute_ns = 0;
  int64_t comm_ns = 0;
  int64_t exposed_comm_ns = 0;  // less peer_wait_ns, as StepMetrics
  int64_t peer_wait_ns = 0;
};
std::vector<RangeMetrics> range_metrics(const Trace& trace, int64_t t0_ns, int64_t t1_ns);
// Per step, its pipeline window: from the first micro-batch span of any rank to the end of the
// last one.
std::map<int, std::pair<int64_t, int64_t>> pipeline_windows(const Trace& trace);

// Holistic Trace Analysis's whole-trace figures, per rank, over the rank's device work in its
// measured steps (device_work.h) taken as one window: what HTA's get_comm_comp_overlap and
// get_temporal_breakdown compute from the Kineto export (`run --trace DIR/`). Overlap is
// |compute ∩ communication| / |communication|; the breakdown splits the time from the first
// kernel's start to the last kernel's end into idle (no kernel), compute and non-compute
// (communication and copies not under compute).
struct WindowMetrics {
  int rank = 0;
  int first_step = -1;
  int last_step = -1;
  int64_t kernel_span_ns = 0;
  int64_t busy_ns = 0;  // |all kernels|
  int64_t compute_ns = 0;
  int64_t comm_ns = 0;
  int64_t overlap_ns = 0;
  int64_t idle_ns() const { return kernel_span_ns - busy_ns; }
  int64_t non_compute_ns() const { return busy_ns - compute_ns; }
};
std::vector<WindowMetrics> window_metrics(const Trace& trace);

// One collective matched across ranks by (group, sequence number, op).
struct CollectiveMetrics {
  std::string op;
  std::string group;
  int64_t seq = -1;
  int step = -1;
  int ranks = 0;           // how many ranks' records were found
  int64_t size_bytes = 0;  // nccl-tests' S: the whole buffer (all_gather: every contribution)
  int64_t time_ns = 0;     // from the last rank's arrival to the last completion
  double algbw_gbps = 0;   // S / time
  double busbw_gbps = 0;   // algbw x the op's factor
  int last_rank = -1;      // who arrived last
  int64_t skew_ns = 0;     // last arrival - first arrival: how long the earliest rank waited
};
std::vector<CollectiveMetrics> collective_metrics(const Trace& trace);

// nccl-tests' bus bandwidth factor: 2(n-1)/n all_reduce, (n-1)/n all_gather / reduce_scatter,
// 1 for broadcast / reduce and anything else.
double busbw_factor(const std::string& op, int n);

// Time intervals [a, b).
using Intervals = std::vector<std::pair<int64_t, int64_t>>;
// Sorted, disjoint union (empty intervals dropped).
Intervals merged(Intervals intervals);
// Length of the intersection of two merged sets.
int64_t intersection_length(const Intervals& x, const Intervals& y);
// The parts of merged set x outside merged set y (communication not hidden by compute).
Intervals difference(const Intervals& x, const Intervals& y);
// Length of the union of [a, b) intervals.
int64_t union_length(Intervals intervals);

// Per rank (index into Trace::ranks), the stretches its sends and receives spent before their
// other end was issued (waiting for a neighbouring stage), merged: see StepMetrics::peer_wait_ns.
std::vector<Intervals> peer_waits(const Trace& trace);

}  // namespace shardscope::profiling
