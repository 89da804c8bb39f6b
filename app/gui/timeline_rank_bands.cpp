// The ranks' bands of the timeline, top to bottom: each rank's lanes, figures per step, memory
// and failure; a folded rank in one row, a pinned rank first.
#include <algorithm>
#include <string>

#include <imgui.h>

#include "app/gui/gui_style.h"
#include "app/gui/timeline_parts.h"
#include "app/gui/timeline_view.h"

namespace shardscope::gui {

using profiling::Trace;

void TimelineView::toggle_folded(int rank_index) {
  if (!folded_.erase(rank_index)) folded_.insert(rank_index);
}

void TimelineView::toggle_pinned(int rank_index) {
  pinned_ = pinned_ == rank_index ? -1 : rank_index;
}

std::vector<size_t> TimelineView::rank_order(size_t ranks) const {
  std::vector<size_t> order;
  if (pinned_ >= 0 && size_t(pinned_) < ranks) order.push_back(size_t(pinned_));
  for (size_t r = 0; r < ranks; ++r)
    if (int(r) != pinned_) order.push_back(r);
  return order;
}

float TimelineView::layout_units(const TimelineIndex& index, size_t ranks) const {
  float units = 0;
  for (const auto& row : index.rows) units += folded_.count(row.rank) ? 0.0f : 1.0f;
  for (size_t r = 0; r < ranks; ++r)
    units += folded_.count(int(r)) ? 1 + kRankGap : 1 + kMemoryStrip + kRankGap;
  return units;
}

void TimelineView::draw_folded(const Frame& f, const TimelineIndex& index, RankBand* band) {
  for (size_t r = band->next_row; r < index.rows.size() && index.rows[r].rank == int(band->index);
       ++r)
    row_top_[r] = band->y;
  f.dl->AddText(ImVec2(canvas_x_ + 4, band->y + 1), 0xFFA0A0A0,
                "folded: click the rank's name to unfold");
  band->y += row_height_ * (1 + kRankGap);
}

void TimelineView::handle_rank_label_click(const Frame& f, const RankBand& band) {
  if (!f.hovered || !ImGui::IsMouseClicked(ImGuiMouseButton_Left)) return;
  const float name_right = f.origin.x + lane_label_x_ - 4;
  if (f.mouse.x < f.origin.x || f.mouse.x >= name_right || f.mouse.y < band.top ||
      f.mouse.y >= band.top + std::max(row_height_, ImGui::GetFontSize() + 2))
    return;
  if (ImGui::GetIO().KeyShift) {
    toggle_pinned(int(band.index));
  } else {
    toggle_folded(int(band.index));
  }
}

// Every rank's band: its lanes, its figures per step, its memory strip, its failure if any.
// Returns the bottom of the last band.
float TimelineView::draw_ranks(const Frame& f, const Trace& trace, const TimelineIndex& index,
                               int root_failure) {
  row_top_.assign(index.rows.size(), 0);
  hovered_ = EventRef{};
  drawn_marks_ = folded_marks_ = 0;
  std::vector<TimelineMark> marks;  // reused by every row
  hovered_figures_valid_ = false;
  int64_t memory_scale = 1;
  for (int64_t p : index.memory_peak) memory_scale = std::max(memory_scale, p);
  RankBand band;
  band.y = f.top;
  for (size_t rank_index : rank_order(trace.ranks.size())) {
    const auto& rank = trace.ranks[rank_index];
    const bool failed = !rank.failure.empty();
    const bool root = failed && (root_failure < 0 || rank.rank == root_failure);
    const ImU32 failure_colour = root ? kFailedColour : kStoppedColour;
    band.index = rank_index;
    band.top = band.host_bottom = band.y;
    // The index's rows are sorted by rank: this rank's begin at the first of its own.
    band.next_row = size_t(
        std::partition_point(index.rows.begin(), index.rows.end(),
                             [&](const TimelineRow& row) { return row.rank < int(rank_index); }) -
        index.rows.begin());
    f.dl->AddLine(ImVec2(f.origin.x, band.y), ImVec2(f.origin.x + f.avail.x, band.y), 0x40FFFFFF);
    const bool folded = folded_.count(int(rank_index)) > 0;
    std::string label = std::string(folded ? "+ " : "") + "rank " + std::to_string(rank.rank);
    f.dl->AddText(ImVec2(f.origin.x + 4, band.y + 1), failed ? failure_colour : 0xFFFFFFFF,
                  label.c_str());
    if (int(rank_index) == pinned_) {
      f.dl->AddText(ImVec2(f.origin.x + 4, band.y + 1 + ImGui::GetFontSize()), 0xFF00D7FF,
                    "pinned");
    }
    handle_rank_label_click(f, band);
    if (folded) {
      draw_folded(f, index, &band);
      continue;
    }
    draw_lanes(f, trace, index, &band, &marks);
    draw_step_figures(f, index, &band);
    draw_rank_memory(f, trace, index, memory_scale, &band);
    if (failed) draw_failure(f, rank, band, root);
  }
  return band.y;
}

}  // namespace shardscope::gui
