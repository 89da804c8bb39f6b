#include "engine/train/device_allocator_peak.h"

#include <c10/cuda/CUDACachingAllocator.h>

namespace shardscope {
namespace {

// Index 0 of a stat array is the aggregate over small and large pools, which is what
// torch.cuda.max_memory_allocated reads ("allocated_bytes.all.peak").
constexpr size_t kAggregatePools = 0;

}  // namespace

void reset_device_allocator_peak(const c10::Device& device) {
  // Before the process's first allocation on the device the allocator is not set up (it would
  // refuse the call), and its peak is zero anyway.
  if (!device.is_cuda() || !c10::cuda::CUDACachingAllocator::get()->initialized()) return;
  c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
}

int64_t device_allocator_peak_bytes(const c10::Device& device) {
  if (!device.is_cuda() || !c10::cuda::CUDACachingAllocator::get()->initialized()) return 0;
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
  return stats.allocated_bytes[kAggregatePools].peak;
}

}  // namespace shardscope
