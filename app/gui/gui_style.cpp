#include "app/gui/gui_style.h"

#include <algorithm>

#include <imgui.h>

namespace shardscope::gui {

using profiling::Category;
using profiling::MemoryKind;

uint32_t category_colour(Category category) {
  switch (category) {
    case Category::kStep:
      return 0xFF5A4A3C;  // slate
    case Category::kMicroBatch:
      return 0xFF7A6A50;  // grey blue
    case Category::kForward:
      return 0xFF3CB44B;  // green
    case Category::kBackward:
      return 0xFFE6A23C;  // blue
    case Category::kGradSync:
      return 0xFF30C8E6;  // amber
    case Category::kOptimizer:
      return 0xFFB45AC8;  // purple
    case Category::kCollective:
      return 0xFF3080F0;  // orange
    case Category::kWait:
      return 0xFF8080C0;  // dusty rose
    case Category::kKernel:
      return 0xFF80C040;  // teal green
    case Category::kMemcpy:
      return 0xFFC0C040;  // cyan
    case Category::kOther:
      break;
  }
  return 0xFF808080;
}

const char* category_label(Category category) {
  switch (category) {
    case Category::kMicroBatch:
      return "micro-batch";
    case Category::kGradSync:
      return "gradient sync";
    case Category::kMemcpy:
      return "copy";
    default:
      return profiling::category_name(category);
  }
}

const char* memory_kind_label(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kOptimizerState:
      return "optimizer state";
    case MemoryKind::kCommBuffers:
      return "communication buffers";
    default:
      return profiling::memory_kind_name(kind);
  }
}

uint32_t memory_kind_colour(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kParameters:
      return 0xFFE6A23C;
    case MemoryKind::kGradients:
      return 0xFF3CB44B;
    case MemoryKind::kOptimizerState:
      return 0xFFB45AC8;
    case MemoryKind::kActivations:
      return 0xFF30C8E6;
    case MemoryKind::kCommBuffers:
      return 0xFF3080F0;
    case MemoryKind::kOther:
      return 0xFF909090;
    case MemoryKind::kAllocated:
      break;
  }
  return 0xFFDDDDDD;
}

}  // namespace shardscope::gui

namespace shardscope::gui {
uint32_t rank_colour(int rank) {
  static const uint32_t palette[] = {0xFFE6A23C, 0xFF3CB44B, 0xFF3080F0, 0xFFB45AC8,
                                     0xFF30C8E6, 0xFFC0C040, 0xFF8080FF, 0xFFD0D0D0};
  return palette[((rank % 8) + 8) % 8];
}
float scaled(float px) {
  return px * std::max(1.0f, ImGui::GetFontSize() / kBaseFontPx);
}

uint32_t stage_shade(uint32_t colour, int stage) {
  if (stage < 0) return colour;
  constexpr float kShade[4] = {1.0f, 0.72f, 0.5f, 0.86f};
  const float k = kShade[stage % 4];
  uint32_t out = colour & 0xFF000000u;
  for (int shift = 0; shift < 24; shift += 8) {
    const float c = float((colour >> shift) & 0xFF) * k;
    out |= uint32_t(c) << shift;
  }
  return out;
}

uint32_t load_colour(double load, double mean) {
  if (mean <= 0) return 0xFF404040;
  const double x = std::clamp(load / mean, 0.0, 2.0);
  auto mix = [](int a, int b, double t) { return static_cast<uint32_t>(a + (b - a) * t); };
  const double hot = x >= 1 ? x - 1 : 0, cold = x < 1 ? 1 - x : 0;
  const uint32_t r = x >= 1 ? mix(90, 200, hot) : mix(90, 40, cold);
  const uint32_t g = x >= 1 ? mix(90, 40, hot) : mix(90, 70, cold);
  const uint32_t b = x >= 1 ? mix(90, 40, hot) : mix(90, 170, cold);
  return 0xFF000000u | (b << 16) | (g << 8) | r;
}

}  // namespace shardscope::gui
