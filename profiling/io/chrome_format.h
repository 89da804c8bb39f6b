#pragma once

#include <cstdint>

// Conventions of shardscope's Chrome Trace Event files, shared by their writer and reader.
namespace shardscope::profiling::chrome_format {

// Memory counters are named "memory parameters", "memory gradients", ...
constexpr const char* kMemoryPrefix = "memory ";
constexpr int kMaxRank = 1 << 16;

// Perfetto takes pid 0 for the kernel's idle process and tid 0 for "the same as the pid": a
// rank is process rank + 1 (its process_name says "rank N" and carries the rank), and tids
// count from 1 (chrome_tracks.h; each thread_name carries its lane). Files written before say
// pid = rank and tid = lane, and their metadata names neither.
inline int64_t pid_of_rank(int rank) {
  return int64_t{rank} + 1;
}

}  // namespace shardscope::profiling::chrome_format
