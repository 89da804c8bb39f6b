#pragma once

#include <cstdint>

#include <c10/core/Device.h>

namespace shardscope {

// The device caching allocator's own count, beside our allocator hook's: what
// torch.cuda.max_memory_allocated would say for this process. A second witness for a rank's
// peak where a rank has its process to itself (processes mode, or world 1); on a CPU there is
// no such count and both calls do nothing.
void reset_device_allocator_peak(const c10::Device& device);
// The most bytes this process's tensors held on `device` at once since the last reset (0 on a
// CPU).
int64_t device_allocator_peak_bytes(const c10::Device& device);

}  // namespace shardscope
