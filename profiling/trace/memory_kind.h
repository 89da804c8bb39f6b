#pragma once

#include <array>
#include <cstdint>

namespace shardscope::profiling {

// Memory a rank holds, by category, sampled over time.
enum class MemoryKind : uint8_t {
  kParameters,
  kGradients,
  kOptimizerState,
  kActivations,
  kCommBuffers,
  // Everything allocated that is none of the above by its tag (not a remainder): blocks of a
  // backward that are no gradient, a forward's scratch freed before backward began, ...
  // Traces written before provenance tracking call it "other".
  kTemporaries,
  kOther = kTemporaries,
  kAllocated,  // everything the rank's threads allocated and still hold, whatever it is
};
// The categories a block can be tagged with (all but kAllocated).
constexpr int kMemoryCategoryCount = static_cast<int>(MemoryKind::kAllocated);
using MemoryCategories = std::array<int64_t, kMemoryCategoryCount>;  // bytes per category
constexpr int kMemoryKindCount = static_cast<int>(MemoryKind::kAllocated) + 1;
const char* memory_kind_name(MemoryKind kind);

}  // namespace shardscope::profiling
