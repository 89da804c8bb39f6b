#pragma once

// What the files that draw the timeline share besides timeline_view.h: one frame's geometry and
// a rank's band while it is drawn (timeline_view.cpp, timeline_rank_bands.cpp).
#include <imgui.h>

#include "app/gui/timeline_view.h"

namespace shardscope::gui {

inline constexpr float kMemoryStrip = 1.5f;  // memory strip height, in rows
inline constexpr float kRankGap = 0.4f;      // between two ranks' bands, in rows

// The frame's geometry and the mouse over its canvas: what every part of draw() reads.
struct TimelineView::Frame {
  ImDrawList* dl = nullptr;
  ImVec2 origin, avail;       // the whole area: gutter and canvas, axis and rows
  float canvas_w = 0;         // the canvas starts at canvas_x_, right of the gutter
  float top = 0;              // the first rank's top, below the axis
  ImVec2 clip_min, clip_max;  // the canvas, axis included: what is drawn in time is clipped to it
  ImVec2 mouse;
  double mouse_x = 0;  // from the canvas's left edge
  bool hovered = false, active = false, released = false;
};

// One rank's band of rows while it is drawn top to bottom; `next_row` carries on to the next
// rank, since the index's rows are sorted by rank.
struct TimelineView::RankBand {
  size_t index = 0;                // into Trace::ranks and the index's per-rank tables
  float top = 0;                   // its first row
  float host_bottom = 0;           // the bottom of its host rows, where a pipeline bubble is shaded
  float y = 0;                     // the top of what is drawn next
  size_t next_row = 0;             // into TimelineIndex::rows
  float labels_free_from = -1e9f;  // below the last lane label drawn: labels never overlap
};

}  // namespace shardscope::gui
