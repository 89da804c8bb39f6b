// A measured range's totals (issue 35: "a selected range shows its totals"): each rank's
// compute, communication and exposed communication within it, by the same definitions as a
// step's figures (profiling::range_metrics), written on each rank's band beside the range.
#include <imgui.h>

#include <algorithm>

#include "app/gui/timeline_ticks.h"
#include "app/gui/timeline_view.h"

namespace shardscope::gui {

void TimelineView::update_range_totals(const profiling::Trace& trace, const TimelineIndex& index) {
  if (measure_requested_) {
    measure_requested_ = false;
    measuring_ = false;
    measure_[0] = index.t_min + static_cast<int64_t>(measure_ms_[0] * 1e6);
    measure_[1] = index.t_min + static_cast<int64_t>(measure_ms_[1] * 1e6);
  }
  if (measure_[0] == measure_[1]) {
    range_totals_.clear();
    return;
  }
  if (!range_totals_.empty() && totals_of_[0] == measure_[0] && totals_of_[1] == measure_[1])
    return;
  range_totals_ = profiling::range_metrics(trace, measure_[0], measure_[1]);
  totals_of_[0] = measure_[0];
  totals_of_[1] = measure_[1];
}

void TimelineView::draw_range_totals(ImDrawList* dl, const profiling::Trace& trace,
                                     const TimelineIndex& index, float x) const {
  for (size_t r = 0; r < range_totals_.size() && r < trace.ranks.size(); ++r) {
    // The rank's first row, where its band begins.
    const auto row = std::find_if(index.rows.begin(), index.rows.end(),
                                  [&](const TimelineRow& row) { return row.rank == int(r); });
    if (row == index.rows.end()) continue;
    const size_t at = size_t(row - index.rows.begin());
    if (at >= row_top_.size()) continue;
    const profiling::RangeMetrics& m = range_totals_[r];
    std::string text = "compute " + format_ms(m.compute_ns * 1e-6) + ", comm " +
                       format_ms(m.comm_ns * 1e-6) + ", exposed " +
                       format_ms(m.exposed_comm_ns * 1e-6);
    // A receive waiting for the other stage's pass: the bubble, said apart from the exposed.
    if (m.peer_wait_ns > 0)
      text += ", waiting for the other stage " + format_ms(m.peer_wait_ns * 1e-6);
    const ImVec2 size = ImGui::CalcTextSize(text.c_str());
    // Below the range's own length, which rank 0's band begins beside; inside the canvas when
    // the range ends near its right edge.
    const float right = canvas_x_ + static_cast<float>(width_px_);
    const ImVec2 pos(std::max(canvas_x_, std::min(x, right - size.x - 4)),
                     row_top_[at] + ImGui::GetFontSize() + 3);
    dl->AddRectFilled(ImVec2(pos.x - 2, pos.y - 1), ImVec2(pos.x + size.x + 2, pos.y + size.y + 1),
                      0xE0181818);
    dl->AddText(pos, 0xFF00FFFF, text.c_str());
  }
}

}  // namespace shardscope::gui
