// The timeline's header, above its canvas: the toolbar (fit, folding, search) with its legend,
// and the line that says what is selected, so the canvas never moves when a selection appears.
#include <algorithm>
#include <cstdio>
#include <string>

#include <imgui.h>

#include "app/gui/gui_style.h"
#include "app/gui/timeline_figures.h"
#include "app/gui/timeline_parts.h"
#include "app/gui/timeline_ticks.h"
#include "app/gui/timeline_view.h"
#include "profiling/metrics/figure_text.h"

namespace shardscope::gui {

using profiling::Category;
using profiling::Event;
using profiling::Trace;

void TimelineView::draw_toolbar(const Trace& trace, const TimelineIndex& index) {
  if (ImGui::Button("Fit all")) request_fit_all();
  ImGui::SameLine();
  if (ImGui::Button("Fit step") && !index.steps.empty()) request_fit_step(fit_step_);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(scaled(90));
  if (!index.steps.empty()) {
    // The steps' own numbers: a run resumed at step 3 shows 3 to 5.
    const int first = index.steps.front().step, last = index.steps.back().step;
    int step = std::clamp(fit_step_, first, last);
    if (ImGui::SliderInt("##step", &step, first, last, "step %d")) request_fit_step(step);
  }
  ImGui::SameLine();
  draw_search(trace);
  ImGui::SameLine();
  // The keys in a line of their own would push the legend off the toolbar: they are a hover away.
  ImGui::TextDisabled("keys (?)");
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(
        "wheel or W/S: zoom\ndrag or A/D: pan\nF: fit\nright-drag: measure (totals per "
        "rank)\nclick: select\n"
        "Esc: clear\nCtrl+F: search, N/P: next and previous match");
  }
  ImGui::SameLine();
  draw_legend(index);
}

void TimelineView::draw_search(const Trace& trace) {
  ImGui::SetNextItemWidth(scaled(160));
  if (focus_search_) {
    ImGui::SetKeyboardFocusHere();
    focus_search_ = false;
  }
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%s", search.c_str());
  if (ImGui::InputTextWithHint("##search", "search / filter", buf, sizeof(buf))) search = buf;
  if (ImGui::IsItemActive() && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter), false)) {
    matches_.update(trace, search);
    go_to_match(trace, true);
  }
  if (search.empty()) return;
  ImGui::SameLine();
  const size_t at = matches_.position(selected_);
  if (matches_.count() == 0) {
    ImGui::TextDisabled("no match");
  } else if (at > 0) {
    ImGui::TextDisabled("%zu of %zu", at, matches_.count());
  } else {
    ImGui::TextDisabled("%zu matches", matches_.count());
  }
}

void TimelineView::go_to_match(const Trace& trace, bool forward) {
  const EventRef next = matches_.step(selected_, forward);
  if (!next.valid()) return;
  select(trace, next);
  const profiling::Event& e = trace.ranks[next.rank].events[next.event];
  const int64_t middle = e.t0_ns + (e.t1_ns - e.t0_ns) / 2;
  window_.t0_ns = middle - static_cast<int64_t>(width_px_ / 2 * window_.ns_per_px);
}

void TimelineView::draw_legend(const TimelineIndex& index) const {
  for (Category c : {Category::kForward, Category::kBackward, Category::kCollective,
                     Category::kOptimizer, Category::kGradSync, Category::kWait}) {
    ImGui::SameLine();
    ImGui::ColorButton(category_label(c), ImGui::ColorConvertU32ToFloat4(category_colour(c)),
                       ImGuiColorEditFlags_NoTooltip, ImVec2(10, 10));
    ImGui::SameLine(0, 3);
    ImGui::TextUnformatted(category_label(c));
  }
  if (index.has_weight_passes) {
    ImGui::SameLine();
    ImGui::ColorButton("weight pass", ImGui::ColorConvertU32ToFloat4(kWeightPassColour),
                       ImGuiColorEditFlags_NoTooltip, ImVec2(10, 10));
    ImGui::SameLine(0, 3);
    ImGui::TextUnformatted("weight pass");
  }
  ImGui::SameLine();
  ImGui::ColorButton("exposed", ImGui::ColorConvertU32ToFloat4(kExposedCommColour),
                     ImGuiColorEditFlags_NoTooltip, ImVec2(10, 10));
  ImGui::SameLine(0, 3);
  ImGui::TextUnformatted("exposed comm");
  if (bubble_formula_ >= 0) {
    ImGui::SameLine();
    ImGui::ColorButton("bubble", ImGui::ColorConvertU32ToFloat4(kBubbleColour),
                       ImGuiColorEditFlags_NoTooltip, ImVec2(10, 10));
    ImGui::SameLine(0, 3);
    ImGui::TextUnformatted("bubble");
  }
}

// Selection details, above the canvas so the canvas does not move when it appears.
void TimelineView::draw_selection_line(const Trace& trace, const TimelineIndex& index) const {
  if (!selected_.valid()) {
    ImGui::TextDisabled(
        "click an event to select it; a collective links to its peers, a send "
        "to its receive");
    return;
  }
  ImGui::TextUnformatted(selection_text(trace, index).c_str());
}

std::string TimelineView::selection_text(const Trace& trace, const TimelineIndex& index) const {
  if (!selected_.valid()) return "";
  const auto d = describe(trace, index, selected_);
  std::string line = "selected: " + d["name"].get<std::string>() + " on rank " +
                     std::to_string(d["rank"].get<int>()) + " (" + d["lane"].get<std::string>() +
                     "), at " + format_ms(d["start_ms"]) + ", " + format_ms(d["duration_ms"]);
  if (linked_point_to_point_ && linked_.size() == 2) {
    // One transfer between two ranks: no one "arrives last", it is in flight from when both
    // ends are posted until the receive completes.
    const Event& send = trace.ranks[linked_[0].rank].events[linked_[0].event];
    const Event& recv = trace.ranks[linked_[1].rank].events[linked_[1].event];
    const int64_t in_flight = recv.t1_ns - std::max(send.t0_ns, recv.t0_ns);
    line += "; point-to-point, rank " + std::to_string(trace.ranks[linked_[0].rank].rank) +
            " -> rank " + std::to_string(trace.ranks[linked_[1].rank].rank) + ", " +
            format_bytes(double(send.bytes)) + ", in flight " +
            format_ms(std::max<int64_t>(0, in_flight) * 1e-6) +
            " (both ends posted to the receive's completion)";
    return line;
  }
  if (d.contains("off_core_ms")) line += " (" + format_ms(d["off_core_ms"]) + " off its core)";
  if (d.contains("bytes")) line += ", " + format_bytes(d["bytes"].get<double>());
  if (d.contains("busbw_gbps")) {
    line += ", busbw " + profiling::format_gbps(d["busbw_gbps"].get<double>());
  }
  if (linked_.size() > 1) {
    int64_t first = INT64_MAX, last = INT64_MIN;
    int last_rank = -1;
    for (const auto& l : linked_) {
      const int64_t t = trace.ranks[l.rank].events[l.event].t0_ns;
      first = std::min(first, t);
      if (t > last) {
        last = t;
        last_rank = trace.ranks[l.rank].rank;
      }
    }
    line += "; on " + std::to_string(linked_.size()) + " ranks, rank " + std::to_string(last_rank) +
            " arrived last, " + format_ms((last - first) * 1e-6) +
            " after the first (the others waited)";
  }
  return line;
}

}  // namespace shardscope::gui
