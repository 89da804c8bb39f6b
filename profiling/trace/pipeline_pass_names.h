#pragma once

#include <string_view>

namespace shardscope::profiling {

// What the pipeline runtime names a stage's passes on the timeline, each followed by " K" (the
// micro-batch) and, with several stages a rank, " stage S". `report` measures pass costs from
// them and the timeline gives the weight pass its own colour, so they live here once.
inline constexpr std::string_view kForwardPassSpan = "forward micro-batch";
inline constexpr std::string_view kBackwardPassSpan = "backward micro-batch";        // whole
inline constexpr std::string_view kInputPassSpan = "backward input micro-batch";     // split: I
inline constexpr std::string_view kWeightPassSpan = "backward weights micro-batch";  // split: W

inline bool is_pass_span(std::string_view name, std::string_view pass) {
  return name.substr(0, pass.size()) == pass;
}

}  // namespace shardscope::profiling
