#pragma once

#include <memory>

#include <c10/core/Device.h>

#include "engine/config.h"

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
  std::shared_ptr<const BatchSampler> sampler;
};

}  // namespace shardscope
