#pragma once

#include <string>
#include <vector>

#include "app/gui/timeline_index.h"
#include "profiling/metrics/trace_metrics.h"

struct ImDrawList;

namespace shardscope::gui {

// The figures drawn on the timeline for one rank and step, in one line: overlap and exposed
// communication (or that there was none), and for a pipeline run (`bubble_formula` >= 0) the
// bubble next to the formula's. `compact`: the short form for a narrow step. `in_progress`: a live
// run's step still being recorded, whose communication is not in yet: it says so instead.
// `failed`: the step in which the rank failed or was stopped, whose figures stop where it did (a
// rank blocked in a collective that never completed once read "no communication").
std::string step_figures_text(const profiling::StepMetrics& m, double bubble_formula, bool compact,
                              bool in_progress = false, bool failed = false);

// Where a rank's strip is drawn: the canvas' left edge and width, the strip's top and height.
struct Strip {
  float canvas_x = 0, canvas_w = 0, y = 0, height = 0;
};

// One rank's figures row: each step's text over the step's span, at its visible left edge and
// clipped to the span; `in_progress` (a live run's last step, or -1) and `failed_step` (the step a
// failed rank stopped in, or -1) say so instead of figures that are not in. Returns the figures
// under (mouse_x, mouse_y), or null.
const profiling::StepMetrics* draw_figures_row(ImDrawList* dl,
                                               const std::vector<profiling::StepMetrics>& figures,
                                               const std::vector<StepSpan>& steps,
                                               const TimeWindow& window, const Strip& strip,
                                               double bubble_formula, float mouse_x, float mouse_y,
                                               int in_progress = -1, int failed_step = -1);

// A rank's pipeline bubble, shaded over its rows (from strip.y, strip.height tall).
void draw_bubble(ImDrawList* dl, const profiling::Intervals& idle, const TimeWindow& window,
                 const Strip& strip);

// A rank's memory strip, scaled to `scale_bytes` at its top, with that scale written in the
// gutter (from gutter_x).
void draw_memory_strip(ImDrawList* dl, const std::vector<std::pair<int64_t, int64_t>>& samples,
                       int64_t scale_bytes, const TimeWindow& window, const Strip& strip,
                       float gutter_x);

// The colour of the shaded bubble (0xAABBGGRR), for the legend.
constexpr uint32_t kBubbleColour = 0x48D0B0A0;

}  // namespace shardscope::gui
