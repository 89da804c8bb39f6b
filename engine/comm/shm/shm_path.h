#pragma once

#include <functional>
#include <string>

#include "engine/comm/shm/shm_collectives.h"

namespace shardscope::shm {

// What a group knows when it picks how its all_reduce, all_gather and reduce_scatter reach the
// peers' tensors. Every rank of one host knows the same, so all pick alike.
struct PathFacts {
  bool same_process = false;  // every rank is a thread of this process
  std::string forced;         // SHARDSCOPE_SHM_PATH: in-place, peer-reads, slots, or empty
  int world = 1;
  long cores = 0;  // online CPUs (0: unknown)
};

// In place for rank threads of one process; by reading peer processes' memory where the kernel
// allows it (`probe`, a collective every rank calls alike, says so); through the slots otherwise,
// and when there are more rank processes than cores (peer reads measured 20-35 % slower than the
// slots with 4 processes on 2 cores, and up to twice as fast with 2). A forced path is taken as
// it is. Throws std::invalid_argument for a forced path that is unknown or impossible here, and
// std::runtime_error when peer reads are forced and the kernel refuses them.
Collectives::Path choose_path(const PathFacts& facts, const std::function<bool()>& probe);

}  // namespace shardscope::shm
