#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "app/gui/timeline_index.h"

namespace shardscope::gui {

// The timeline's arithmetic that needs no pixels drawn: zoom limits, the time axis, which step
// markers to draw, where a cut label goes, what the memory strip held. Pure, so tests check it.

// The closest zoom: trace times are whole nanoseconds, so below a nanosecond per pixel there is
// nothing more to see, and the axis' ticks (tick_step_ns(kMinNsPerPx, ...)) are still whole,
// distinct nanoseconds.
constexpr double kMinNsPerPx = 1.0;
constexpr double kMaxNsPerPx = 1e12;

// A tick spacing of 1, 2 or 5 times a power of ten that leaves about `px` pixels between ticks.
double tick_step_ns(double ns_per_px, double px);
// A tick at `t_ns` (from the trace's start) on an axis with ticks `step_ns` apart: in the unit
// that suits t, with as many decimals as the step needs, so that neighbouring ticks never read
// the same ("221.3240002 s", "221.3240004 s").
std::string tick_label(double t_ns, double step_ns);

std::string format_ms(double ms);
std::string format_bytes(double bytes);

// Which steps get a marker: every `stride`-th step number, where the stride is 1, 2 or 5 times
// a power of ten that leaves markers at least `min_px` apart at this zoom (steps spaced as the
// trace's steps are on average). Zoomed out over 25 000 steps this is every 200th or so, not a
// curtain; zoomed in, every step.
int step_stride(const std::vector<StepSpan>& steps, double ns_per_px, double min_px);

// Where the label of a span drawn from x0 to x1 goes in a canvas `width_px` wide: at the start
// of its visible part (a span cut at the left edge keeps its label readable), or false when
// less than `min_px` of it is visible.
bool label_x(double x0, double x1, double width_px, double min_px, double* x);

// The step numbered `number`, or the nearest one there is; null without steps.
const StepSpan* find_step(const std::vector<StepSpan>& steps, int number);

// Bytes held at time t (the last sample at or before it; -1 before the first).
int64_t held_at(const std::vector<std::pair<int64_t, int64_t>>& samples, int64_t t);

}  // namespace shardscope::gui
