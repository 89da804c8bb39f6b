#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// Device time models one device per rank. Two things a shared, busy machine gets wrong are put
// right before a recording is replayed onto a hardware profile (trace_replay.h):
//
// - The same work takes the same time (same_work_same_time). Each piece of a rank's host lane
//   (the part of a span that none of its children covers, or a gap between spans) is keyed by
//   what it is: its span's category and name (micro-batch numbers left out), the edges that bound
//   it, and its place among alike pieces of that span. Every piece takes the median over all its
//   occurrences, on every step, micro-batch and rank of its work class. Ranks of one class do
//   identical work under spans of one name (data-parallel replicas); different classes keep
//   their real differences (a pipeline stage with more layers, the last stage's loss, a rank
//   whose experts get more tokens). A piece's length is what its thread ran: where the recording
//   measured how long the thread was off its core within a span (Event::off_cpu_us), that is
//   taken out first, so a stage preempted all through a busy machine's run is not slower.
// - The device runs ahead of its host, as a GPU does (ReplayOptions::device_ahead_of_host, over
//   device_work_intervals). Forward, backward, optimizer and gradient-sync spans are device work;
//   what the host does between them (posting a send, freeing a micro-batch's activations) runs
//   beside the device and shows only where the host falls behind.
//
// Both apply to recordings whose device work is on their host lanes (a CPU "device"). A GPU
// recording has its kernels on device lanes and keeps them as they are.
bool device_work_on_host_lanes(const Trace& trace);

// `work_class`, per rank (index into Trace::ranks): equal values, identical work under spans of
// one name; empty: every rank its own. Waits on communication calls keep a nanosecond (the
// replay prices them), waits for a turn on a shared device none. The result has the same events,
// lanes and counters at new times.
Trace same_work_same_time(const Trace& measured, const std::vector<int>& work_class);

// The instants of `rank`'s host lane where its device works, in time order, disjoint.
std::vector<std::pair<int64_t, int64_t>> device_work_intervals(const Trace& trace,
                                                               const RankTrace& rank);

}  // namespace shardscope::profiling
