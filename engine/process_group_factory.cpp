#include "engine/process_group_factory.h"

#include <stdexcept>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

namespace shardscope {

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const ProcessGroupSpec& spec) {
  if (spec.backend != "gloo") {
    throw std::invalid_argument("process group backend '" + spec.backend + "' is not supported");
  }
  auto store = c10::make_intrusive<c10d::PrefixStore>("shardscope/" + spec.name, spec.store);
  auto options = c10d::ProcessGroupGloo::Options::create(spec.timeout);
  // Loopback: ranks of this launcher share one machine, and it needs no name resolution.
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  options->threads = 2;
  auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, spec.rank, spec.world, options);

  auto group = c10::make_intrusive<c10d::ProcessGroup>(store, spec.rank, spec.world);
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
  // Gloo moves CUDA tensors through host staging, so the same backend serves a shared cuda:0.
  group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
  return group;
}

}  // namespace shardscope
