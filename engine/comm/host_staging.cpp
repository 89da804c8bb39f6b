#include "engine/comm/host_staging.h"

#include <mutex>

#include "profiling/record/memory_tracker.h"

namespace shardscope {

bool needs_host_staging(const StagingCase& c) {
  return c.asked || (c.cuda_tensor && !c.backend_takes_cuda && !c.carried_on_device);
}

at::Tensor HostStaging::host_copy(const at::Tensor& t, bool with_contents) {
  profiling::RankMemoryTracker::Paused not_the_devices_memory;
  // Always a new buffer, also for a host tensor (tests stage CPU tensors to exercise this path).
  const auto options = t.options().device(at::kCPU).memory_format(at::MemoryFormat::Contiguous);
  if (!with_contents) return at::empty(t.sizes(), options);
  return t.to(options, /*non_blocking=*/false, /*copy=*/true);
}

at::Tensor HostStaging::in(const at::Tensor& t) {
  return active_ && t.defined() ? host_copy(t, true) : t;
}

at::Tensor HostStaging::out(const at::Tensor& t) {
  if (!active_ || !t.defined()) return t;
  at::Tensor host = host_copy(t, false);
  outputs_.emplace_back(t, host);
  return host;
}

at::Tensor HostStaging::in_out(const at::Tensor& t) {
  if (!active_ || !t.defined()) return t;
  at::Tensor host = host_copy(t, true);
  outputs_.emplace_back(t, host);
  return host;
}

std::vector<at::Tensor> HostStaging::out(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> staged;
  for (const auto& t : ts) staged.push_back(out(t));
  return staged;
}

std::vector<at::Tensor> HostStaging::in(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> staged;
  for (const auto& t : ts) staged.push_back(in(t));
  return staged;
}

std::function<void()> HostStaging::finish() {
  if (outputs_.empty()) return {};
  auto once = std::make_shared<std::once_flag>();
  return [once, outputs = outputs_] {
    std::call_once(*once, [&] {
      for (const auto& [target, host] : outputs) target.copy_(host);
    });
  };
}

}  // namespace shardscope
