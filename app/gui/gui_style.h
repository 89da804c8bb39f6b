#pragma once

#include <cstdint>

#include "profiling/trace/trace.h"

namespace shardscope::gui {

// Colours as 0xAABBGGRR (ImGui's ImU32), chosen so a category reads the same in every window
// and so screenshot tests can look for exact values.
uint32_t category_colour(profiling::Category category);
uint32_t memory_kind_colour(profiling::MemoryKind kind);
// What legends and labels call them, in words ("optimizer state", "gradient sync"); files and
// JSON keep the snake_case names (category_name, memory_kind_name).
const char* category_label(profiling::Category category);
const char* memory_kind_label(profiling::MemoryKind kind);
constexpr uint32_t kExposedCommColour = 0xFF2020E0;  // red: communication not hidden by compute
constexpr uint32_t kFailedColour = 0xFF3030FF;       // the rank whose failure stopped the run
constexpr uint32_t kStoppedColour = 0xFF30A0F0;      // ranks stopped because of it
constexpr uint32_t kSelectionColour = 0xFFFFFFFF;
constexpr uint32_t kFoldColour = 0xFF909090;
constexpr uint32_t kWeightPassColour = 0xFFF5D09C;  // light blue: a split backward's weight pass

// The default text's height in pixels (Dear ImGui's own font), from which the text size grows.
constexpr float kBaseFontPx = 13.0f;
// A width in pixels at the default text, grown with the text size (View > text size) so that
// fields, buttons and the timeline's rows keep fitting what they hold.
float scaled(float px);

// A pipeline stage's shade of a pass colour: stages a rank holds (interleaved, ZBV's V, DualPipeV)
// alternate four shades, so which stage ran when shows without hovering.
uint32_t stage_shade(uint32_t colour, int stage);

// A load against its mean (the Experts tab): grey at the mean, deepening to red at twice it and
// to blue at none.
uint32_t load_colour(double load, double mean);

// The RGB bytes of a colour (for tests that look for it in a screenshot).
inline void colour_rgb(uint32_t colour, uint8_t rgb[3]) {
  rgb[0] = colour & 0xFF;
  rgb[1] = (colour >> 8) & 0xFF;
  rgb[2] = (colour >> 16) & 0xFF;
}

}  // namespace shardscope::gui

namespace shardscope::gui {
// A distinct colour per rank (cycles after eight).
uint32_t rank_colour(int rank);
}  // namespace shardscope::gui
