#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "profiling/trace/trace.h"

namespace shardscope::gui {

// What a rank held, by category, at the moment it held the most: every block by what it is, as
// the memory tracker recorded it (its exact breakdown at the peak is logged at the peak's time).
// Traces written before provenance tracking recorded no temporaries: for those, what the named
// categories leave of the total is shown as temporaries, as it was then.
struct MemoryBreakdown {
  int64_t t_ns = 0;
  std::array<int64_t, profiling::kMemoryKindCount> bytes{};  // kAllocated: the total held
  int64_t of(profiling::MemoryKind kind) const { return bytes[static_cast<int>(kind)]; }
  int64_t total() const;
};
MemoryBreakdown peak_breakdown(const profiling::RankTrace& rank);

// When a rank's peak happened, in words: "step 1, backward blocks.0" (the innermost span of its
// host lane at that moment). Two runs' bars differ in what was alive at their peaks, which may be
// different moments: FSDP with prefetch peaks in backward, holding a prefetched unit while some
// activations are already freed.
std::string peak_moment(const profiling::Trace& trace, const profiling::RankTrace& rank,
                        int64_t t_ns);

}  // namespace shardscope::gui
