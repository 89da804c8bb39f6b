#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiling/trace/trace.h"

namespace shardscope::profiling {

constexpr const char* kCudaRuntimeLane = "cuda runtime";

// One piece of device work, or the CUDA runtime call that launched it, attributed to the rank
// that launched it, on the host clock.
struct DeviceActivity {
  int rank = -1;
  std::string name;
  // kKernel, kMemcpy for copies and memsets, kOther for a runtime call (cudaLaunchKernel, ...).
  Category category = Category::kKernel;
  uint32_t stream = 0;
  int64_t t0_ns = 0;
  int64_t t1_ns = 0;
  int64_t bytes = 0;
  // CUPTI's correlation id: the same on a kernel and on the runtime call that launched it, so
  // an exported trace (Kineto) links each kernel to its launch and so to the step it ran for.
  uint32_t correlation = 0;
};

// GPU activity tracing with CUPTI (concurrent kernels, memcpy, memset, runtime API, external
// correlation). Each rank thread pushes its rank as an external correlation id around its work,
// so kernels launched from it are attributed to it. Built only where CUPTI was found; without a
// GPU or driver enable() fails with the reason and the caller carries on with host tracing.
class DeviceTracer {
 public:
  static DeviceTracer& instance();

  // False, with `why`, when device tracing is unavailable (not built, no driver, no GPU).
  bool enable(std::string* why);
  bool enabled() const { return enabled_; }
  void push_rank(int rank);
  void pop_rank();
  // Synchronises the device, flushes CUPTI's buffers and hands over what was recorded.
  std::vector<DeviceActivity> collect();
  void disable();

  // Whether this build has CUPTI at all.
  static bool built_with_cupti();

 private:
  bool enabled_ = false;
};

// Adds device activity to a trace: per rank, a lane per CUDA stream ("stream N") and the runtime
// calls that launched it on a lane of their own (kCudaRuntimeLane); every event keeps its
// correlation id in Event::seq.
void add_device_activity(Trace& trace, const std::vector<DeviceActivity>& activity);

// A copy's name as the PyTorch profiler (Kineto) gives it, from CUPTI's copy kind and the kinds
// of memory at either end: "Memcpy DtoH (Device -> Pageable)". A pageable end, or a device-to-
// device copy taking milliseconds, is what a timeline needs to say. Values outside CUPTI's
// enumerations read "Unknown".
std::string memcpy_name(int copy_kind, int src_kind, int dst_kind);

}  // namespace shardscope::profiling
