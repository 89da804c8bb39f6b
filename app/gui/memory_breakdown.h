#pragma once

#include <array>
#include <cstdint>

#include "profiling/trace.h"

namespace shardscope::gui {

// What a rank held, by category, at the moment it held the most: the categories the strategy
// reports (parameters, gradients, optimizer state, communication buffers) and the activations
// the recorder derives, with the rest of what its threads had allocated as "other".
struct MemoryBreakdown {
  int64_t t_ns = 0;
  std::array<int64_t, profiling::kMemoryKindCount> bytes{};  // kAllocated: the total held
  int64_t of(profiling::MemoryKind kind) const { return bytes[static_cast<int>(kind)]; }
  int64_t total() const;
};
MemoryBreakdown peak_breakdown(const profiling::RankTrace& rank);

}  // namespace shardscope::gui
