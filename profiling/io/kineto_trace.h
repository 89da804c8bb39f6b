#pragma once

#include <string>

#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// The PyTorch profiler's (Kineto's) JSON for one rank, the shape Holistic Trace Analysis and
// other PyTorch tooling read: `distributedInfo` names the rank (HTA finds it with the regex
// "rank":\s+(\d+), so the header is written with a space after the colon and before any event);
// each measured step is a `ProfilerStep#N` span on the host thread over the step's window
// (measured_step_windows: HTA gives a kernel the step its launch falls in), with the rank's host
// spans inside it; the rank's device work (device_work.h) are `kernel` events on their streams,
// each with the `cuda_runtime` call that launched it (same `correlation`), collectives named as
// NCCL names its kernels. Times are whole microseconds from the earliest event of the whole trace,
// so the ranks' files line up (HTA rounds fractional ones, start up and end down, which would
// shorten every kernel). The first step is left out when there are others, as a profiler
// schedule's warm-up would be and as `report` leaves it out.
std::string to_kineto_json(const Trace& trace, const RankTrace& rank);

// "rank-3.json": the name of a rank's file in a trace directory.
std::string kineto_file_name(int rank);

}  // namespace shardscope::profiling
