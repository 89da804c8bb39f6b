#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiling/projection/hardware_profile.h"
#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// A stretch of a rank's measured time whose compute takes `scale` times as long projected: a
// pass whose kernels the GPU model priced (trace_projection: projected pass time over the
// measured compute in it).
struct ScaledSpan {
  int64_t t0_ns = 0, t1_ns = 0;
  double scale = 1.0;
};

struct ReplayOptions {
  // Projected compute time = measured time x this (the target device's speed relative to the
  // device the trace was measured on).
  double compute_scale = 1.0;
  // Per rank (in the order of the trace's ranks), sorted and disjoint: inside these, their own
  // scale instead of compute_scale. Empty: compute_scale everywhere.
  std::vector<std::vector<ScaledSpan>> span_scales;
  // The device runs ahead of its host (device_model.h): spans of device work queue on it, the
  // host's own work between them is hidden unless the host falls behind, and a wait on a
  // communication call holds the device, not the host (a GPU stream's wait). Off: the host
  // does all of it in turn (a recording whose device work is on device lanes).
  bool device_ahead_of_host = false;
};

// Re-schedules every rank's recorded chain onto its own device of `hw`. What a rank's host did
// between communication calls (compute, framework work) takes `compute_scale` times as long;
// each collective starts once every member of its group has issued it and that group's earlier
// collectives on those ranks are done, and takes the cost model's time on `hw`; a rank that
// waited on a collective waits until the projected completion; sends and receives pair up by
// their per-direction sequence numbers. The result has the same shape as the measured trace
// (same events, lanes and counters, new times), so metrics and views apply unchanged. Throws
// std::runtime_error when the trace is inconsistent (a collective some member never issued).
Trace replay_trace(const Trace& measured, const HardwareProfile& hw, const ReplayOptions& options);

}  // namespace shardscope::profiling
