#pragma once

#include <cstdint>
#include <vector>

#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// What a rank's device did in its measured steps, as a GPU profiler would record it: kernels on
// streams, each launched by the host. One definition for the Kineto export (what Holistic Trace
// Analysis reads) and for `report`'s window table, so the two measure the same thing.
//
// On a GPU (the rank has CUPTI kernels): the recorded kernels, copies and memsets on their real
// streams, with CUPTI's correlation id and the runtime call that launched them. Without one
// (CPU ranks, where the host thread is the device): each forward / backward span is a compute
// kernel, launched at its start. Collectives are communication kernels from issue to
// completion, unless the GPU recorded NCCL's own kernels.
enum class WorkKind : uint8_t { kCompute, kCommunication, kMemory };

struct DeviceWork {
  int64_t t0_ns = 0;
  int64_t t1_ns = 0;
  const Event* event = nullptr;   // the recorded kernel, span or collective
  const Event* launch = nullptr;  // the recorded runtime call; null where it is implied
  int64_t correlation = 0;        // CUPTI's id, or a fresh one (above CUPTI's) where implied
  int stream = 0;                 // no two kernels on one stream overlap
  int step = -1;
  WorkKind kind = WorkKind::kCompute;
  bool recorded = false;  // a collective the GPU recorded as its kernel (see device_work)
  // When the host launched it: the runtime call's start, else the work's own start.
  int64_t launch_ns() const { return launch != nullptr ? launch->t0_ns : t0_ns; }
};

// Streams given to implied kernels: compute from 7 (CUDA's default stream in PyTorch traces),
// collectives from 1000, clear of the stream ids CUDA hands out.
constexpr int kFirstComputeStream = 7;
constexpr int kFirstCommStream = 1000;

// The steps a rank's figures cover: every step it recorded except the first (warm-up, one-off
// set-up) when there are others, as `report`'s per-step medians do; in a PyTorch profiler's
// trace (kProfilerMode) every step, as Holistic Trace Analysis takes them.
std::vector<int> measured_steps(const Trace& trace, const RankTrace& rank);
// Whether a trace's first step is warm-up to leave out of its figures: ours, yes; a PyTorch
// profiler's, no.
bool first_step_is_warm_up(const Trace& trace);

// A measured step's window on one rank: from the first start to the last end of the rank's
// events of that step (a collective issued after the step's own span still belongs to it), as
// `report` measures a step. The Kineto export's ProfilerStep#N spans are these windows.
struct StepWindow {
  int step = -1;
  int64_t t0_ns = 0;
  int64_t t1_ns = 0;
};
std::vector<StepWindow> measured_step_windows(const Trace& trace, const RankTrace& rank);

// The rank's device work launched in its measured steps, by start time.
std::vector<DeviceWork> device_work(const Trace& trace, const RankTrace& rank);

}  // namespace shardscope::profiling
