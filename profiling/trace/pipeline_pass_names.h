#pragma once

#include <cstdlib>
#include <string>
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

// A pass span's short name for the timeline, "F s2 mb3" (forward of micro-batch 3 on stage 2;
// B a whole backward, I its input half, W its weight half), and its stage (-1 where the rank
// holds one stage, so the name has none), and a tighter "F s2 m3" for a narrow span. Empty
// `text` for any other span.
struct PassLabel {
  std::string text, compact;
  int stage = -1;
};
inline PassLabel pass_label(std::string_view name) {
  // Longest prefix first: the split passes begin as the whole backward does.
  constexpr std::pair<std::string_view, const char*> kPasses[] = {{kInputPassSpan, "I"},
                                                                  {kWeightPassSpan, "W"},
                                                                  {kBackwardPassSpan, "B"},
                                                                  {kForwardPassSpan, "F"}};
  for (const auto& [pass, letter] : kPasses) {
    if (!is_pass_span(name, pass) || name.size() < pass.size() + 2 || name[pass.size()] != ' ')
      continue;
    const std::string rest(name.substr(pass.size() + 1));  // "3" or "3 stage 2"
    char* end = nullptr;
    const long micro = std::strtol(rest.c_str(), &end, 10);
    if (end == rest.c_str()) return {};
    PassLabel label;
    const std::string_view tail(end);
    constexpr std::string_view kStage = " stage ";
    if (tail.substr(0, kStage.size()) == kStage) label.stage = std::atoi(end + kStage.size());
    const std::string head =
        std::string(letter) +
        (label.stage >= 0 ? " s" + std::to_string(label.stage) : std::string());
    label.text = head + " mb" + std::to_string(micro);
    label.compact = head + " m" + std::to_string(micro);
    return label;
  }
  return {};
}

}  // namespace shardscope::profiling
