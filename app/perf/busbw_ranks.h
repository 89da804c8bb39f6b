#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/Device.h>

namespace c10d {
class ProcessGroup;
}

namespace shardscope::perf {

// Seconds per call of each op ("all_reduce", "all_gather", "reduce_scatter") and size in bytes
// (nccl-tests' S), the median of `rounds` rounds: what the rank calling it measured.
using CollectiveSeconds = std::map<std::pair<std::string, int64_t>, double>;

// Every rank of `pg` calls it alike; `barrier` lines them up before each round. (Rank threads
// must not call ProcessGroup::barrier together: LibTorch's keeps its tensor in a static. Comm's
// barrier is safe.) The tensors live on `device`; a CUDA device is synchronized before a round's
// clock stops (a Work may complete before its copies on the device do).
CollectiveSeconds time_collectives(c10d::ProcessGroup& pg, int world,
                                   const std::vector<int64_t>& sizes, int rounds,
                                   const std::function<void()>& barrier,
                                   const c10::Device& device = c10::Device(c10::kCPU));

// The same, measured by `world` rank processes of this binary (`shardscope perf-busbw-rank`)
// that meet through a file store in a temporary folder. Throws if one fails or all of them take
// longer than ten minutes (they are killed then).
CollectiveSeconds time_collectives_in_processes(const std::string& backend, int world,
                                                const std::vector<int64_t>& sizes, int rounds,
                                                const std::string& device = "cpu");

// One such rank process: joins the group, times, and rank 0 writes dir/result.json.
struct BusbwRankArgs {
  int rank = 0, world = 2, rounds = 3;
  std::string backend = "shm", dir, device = "cpu";
  std::vector<int64_t> sizes;
};
int busbw_rank_main(const BusbwRankArgs& args);

}  // namespace shardscope::perf
