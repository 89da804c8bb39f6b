#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "engine/train/config.h"

namespace shardscope {

class Comm;
class BatchSampler;

// What one rank is given by the launcher: who it is, where it runs, and how it talks.
struct RankContext {
  int rank = 0;
  int world = 1;
  c10::Device device = c10::Device(c10::kCPU);
  const Config* config = nullptr;
  Comm* comm = nullptr;  // the world group
  // A traced sub-group of the world with `ranks` (world ranks, in group order), created on first
  // use and kept until the rank ends. Only members call it, each with the same name and ranks;
  // the name identifies the group in the trace.
  std::function<Comm&(const std::string& name, const std::vector<int>& ranks)> subgroup;
  std::shared_ptr<const BatchSampler> sampler;
  // How long collectives of every group of this rank may wait from now on (sub-groups created
  // later start with it too).
  std::function<void(std::chrono::milliseconds)> set_collective_timeout;
};

}  // namespace shardscope
