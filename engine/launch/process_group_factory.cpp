#include "engine/launch/process_group_factory.h"

#include "engine/comm/shm/process_group_shm.h"
#include "engine/launch/environment.h"

#include <csignal>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace shardscope {

// Gloo writes to its peers' sockets without MSG_NOSIGNAL: when a failing rank closes its
// connections, a peer's write raises SIGPIPE, whose default action kills the whole process
// (every rank, and the report). Python ignores SIGPIPE for the same reason; so do we, and the
// write fails with EPIPE, which Gloo turns into an exception on the peer.
//
// c10d's flight recorder is one process-wide singleton that every group writes on each
// collective; with several ranks' groups in one process its bookkeeping races (crashes seen
// in FlightRecorder::recordWithResetEnabled when ranks start collectives together). Comm
// records every call already, so it is switched off before the first group reads the setting.
void prepare_process_for_groups() {
  static std::mutex preparing;
  std::lock_guard<std::mutex> lock(preparing);
  std::signal(SIGPIPE, SIG_IGN);
  const char* buffer = std::getenv("TORCH_FR_BUFFER_SIZE");
  if (buffer == nullptr || std::string(buffer) != "0")
    setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/1);
}

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const ProcessGroupSpec& spec) {
  if (spec.backend != "gloo" && spec.backend != "nccl" && spec.backend != "shm") {
    throw std::invalid_argument("process group backend '" + spec.backend + "' is not supported");
  }
  // Done already by whoever started this rank's thread; then this only reads (safe beside other
  // threads' reads).
  prepare_process_for_groups();
  auto store = c10::make_intrusive<c10d::PrefixStore>("shardscope/" + spec.name, spec.store);
  if (spec.backend == "shm") {
    // Ranks of one host: every tensor, host or CUDA, through shared memory.
    shm::ProcessGroupShm::Options options;
    options.timeout = spec.timeout;
    options.slot_bytes = shm_slot_bytes(options.slot_bytes, spec.world);
    options.ring_bytes = shm_ring_bytes(options.ring_bytes);
    auto shared = c10::make_intrusive<shm::ProcessGroupShm>(store, spec.rank, spec.world, options);
    auto group = c10::make_intrusive<c10d::ProcessGroup>(store, spec.rank, spec.world);
    group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::CUSTOM, shared);
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::CUSTOM, shared);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::CUSTOM);
    return group;
  }
  auto options = c10d::ProcessGroupGloo::Options::create(spec.timeout);
  // Peers connect to the address a device is bound to: loopback for ranks of this machine's own
  // launcher, a routable address (or the named interfaces) for ranks on other hosts.
  if (spec.network.interfaces.empty()) {
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(spec.network.address));
  } else {
    for (const auto& name : spec.network.interfaces)
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
  }
  options->threads = 2;
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, spec.rank, spec.world, options);

  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, spec.rank, spec.world);
  // Host tensors (loss statistics, flags) always travel over Gloo.
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
  if (spec.backend == "nccl") {
#ifdef USE_C10D_NCCL
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
    nccl_options->timeout = spec.timeout;
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        c10::make_intrusive<c10d::PrefixStore>("nccl", store), spec.rank, spec.world, nccl_options);
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
    return group;
#else
    throw std::invalid_argument("this LibTorch was built without NCCL");
#endif
  }
  // Gloo moves CUDA tensors through host staging, so the same backend serves a shared cuda:0.
  group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  return group;
}

}  // namespace shardscope
