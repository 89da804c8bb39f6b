#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiling/trace.h"

namespace shardscope::profiling {

// One piece of device work, attributed to the rank that launched it, on the host clock.
struct DeviceActivity {
  int rank = -1;
  std::string name;
  Category category = Category::kKernel;  // kKernel, or kMemcpy for copies and memsets
  uint32_t stream = 0;
  int64_t t0_ns = 0;
  int64_t t1_ns = 0;
  int64_t bytes = 0;
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

// Adds device activity to a trace: per rank, a lane per CUDA stream ("stream N").
void add_device_activity(Trace& trace, const std::vector<DeviceActivity>& activity);

}  // namespace shardscope::profiling
