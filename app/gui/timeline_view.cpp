#include "app/gui/timeline_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>

#include "app/gui/gui_style.h"
#include "app/gui/timeline_figures.h"
#include "app/gui/timeline_parts.h"
#include "app/gui/timeline_ticks.h"
#include "profiling/metrics/figure_text.h"
#include "profiling/metrics/trace_metrics.h"

namespace shardscope::gui {

using profiling::Category;
using profiling::Event;
using profiling::Trace;

namespace {

// The head of an arrow from `from` to `to`, at `to`: a send's data arriving at its receive.
void draw_arrow_head(ImDrawList* dl, ImVec2 from, ImVec2 to, ImU32 colour) {
  const float dx = to.x - from.x, dy = to.y - from.y;
  const float length = std::sqrt(dx * dx + dy * dy);
  if (length < 1) return;
  const float ux = dx / length, uy = dy / length, size = 8;
  dl->AddTriangleFilled(
      to, ImVec2(to.x - ux * size - uy * size / 2, to.y - uy * size + ux * size / 2),
      ImVec2(to.x - ux * size + uy * size / 2, to.y - uy * size - ux * size / 2), colour);
}

constexpr float kGutter = 150;     // rank and lane labels
constexpr float kAxisHeight = 22;  // time axis
constexpr double kFoldPx = 3;      // events narrower than this are folded

ImU32 dimmed(ImU32 colour) {
  return (colour & 0x00FFFFFF) | 0x50000000;
}

}  // namespace

void TimelineView::reset() {
  hovered_ = selected_ = EventRef{};
  linked_.clear();
  measuring_ = false;
  measure_[0] = measure_[1] = 0;
  pending_fit_ = kFitAll;
  search.clear();
  folded_.clear();  // by rank index: another trace's ranks are others
  pinned_ = -1;
}

void TimelineView::apply_fit(const TimelineIndex& index, double width_px) {
  int64_t a = index.t_min, b = index.t_max;
  if (const StepSpan* s = find_step(index.steps, fit_step_); pending_fit_ == kFitStep && s) {
    fit_step_ = s->step;
    a = s->t0_ns;
    b = s->t1_ns;
  } else if (pending_fit_ == kFitRange) {
    a = index.t_min + static_cast<int64_t>(range_ms_[0] * 1e6);
    b = index.t_min + static_cast<int64_t>(range_ms_[1] * 1e6);
  }
  const int64_t margin = pending_fit_ == kFitRange ? 0 : (b - a) / 50;
  window_.t0_ns = a - margin;
  window_.ns_per_px =
      std::clamp(double(b - a + 2 * margin) / std::max(width_px, 1.0), kMinNsPerPx, kMaxNsPerPx);
  pending_fit_ = kNone;
}

void TimelineView::draw(const Trace& trace, const TimelineIndex& index, int root_failure) {
  last_trace_ = &trace;
  matches_.update(trace, search);
  draw_toolbar(trace, index);
  draw_selection_line(trace, index);
  const Frame frame = begin_canvas(trace, index);
  handle_canvas_input(frame);
  handle_keys(trace, frame);
  update_range_totals(trace, index);
  keep_trace_in_view(index, frame.canvas_w);
  draw_time_axis(frame, index);
  const float bottom = draw_ranks(frame, trace, index, root_failure);
  draw_selection_and_links(frame, trace, index, bottom);
  draw_hover(frame, trace, index);
}

// Lays the canvas out in what is left of the window and claims it as one widget, so the mouse
// over it is ours (zoom, pan, measure, select) rather than the window's.
TimelineView::Frame TimelineView::begin_canvas(const Trace& trace, const TimelineIndex& index) {
  Frame f;
  f.origin = ImGui::GetCursorScreenPos();
  f.avail = ImGui::GetContentRegionAvail();
  // Labels and rows grow with the text size (View > text size).
  const float gutter = scaled(kGutter);
  f.canvas_w = std::max(50.0f, f.avail.x - gutter);
  const float canvas_h = std::max(50.0f, f.avail.y - kAxisHeight);
  width_px_ = f.canvas_w;
  canvas_x_ = f.origin.x + gutter;
  lane_label_x_ = scaled(60);
  if (pending_fit_ != kNone) apply_fit(index, width_px_);

  // Vertical layout: rows per rank plus a memory strip, shrunk to fit the window.
  const size_t ranks = trace.ranks.size();
  // Per rank: its rows, a figures row, the memory strip and a gap.
  const float units = layout_units(index, ranks);
  row_height_ = std::clamp(canvas_h / std::max(units, 1.0f), 8.0f, scaled(22.0f));
  f.top = f.origin.y + kAxisHeight;

  ImGui::InvisibleButton("timeline_canvas", ImVec2(f.avail.x, std::max(f.avail.y, 60.0f)),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight);
  f.hovered = ImGui::IsItemHovered();
  f.active = ImGui::IsItemActive();
  f.released = ImGui::IsItemDeactivated();
  f.mouse = ImGui::GetIO().MousePos;
  f.mouse_x = f.mouse.x - canvas_x_;

  f.dl = ImGui::GetWindowDrawList();
  f.clip_min = ImVec2(canvas_x_, f.origin.y);
  f.clip_max = ImVec2(canvas_x_ + f.canvas_w, f.origin.y + f.avail.y);
  return f;
}

// Zoom around the cursor, pan by dragging, measure with the right button.
void TimelineView::handle_canvas_input(const Frame& f) {
  const ImGuiIO& io = ImGui::GetIO();
  if (f.hovered && io.MouseWheel != 0 && f.mouse_x >= 0) {
    const int64_t t_at = window_.t_of(f.mouse_x);
    window_.ns_per_px =
        std::clamp(window_.ns_per_px * std::pow(0.8, io.MouseWheel), kMinNsPerPx, kMaxNsPerPx);
    window_.t0_ns = t_at - static_cast<int64_t>(f.mouse_x * window_.ns_per_px);
  }
  if (f.active && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f)) {
    window_.t0_ns -= static_cast<int64_t>(io.MouseDelta.x * window_.ns_per_px);
  }
  if (f.hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Right)) {
    measuring_ = true;
    measure_[0] = measure_[1] = window_.t_of(f.mouse_x);
  }
  if (measuring_) {
    measure_[1] = window_.t_of(f.mouse_x);
    if (!ImGui::IsMouseDown(ImGuiMouseButton_Right)) measuring_ = false;
  }
}

void TimelineView::handle_keys(const Trace& trace, const Frame& f) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput || !ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows)) return;
  const double middle = f.canvas_w / 2;
  auto zoom = [&](double factor) {
    const int64_t t_mid = window_.t_of(middle);
    window_.ns_per_px = std::clamp(window_.ns_per_px * factor, kMinNsPerPx, kMaxNsPerPx);
    window_.t0_ns = t_mid - static_cast<int64_t>(middle * window_.ns_per_px);
  };
  // Dear ImGui 1.86 indexes keys by the platform's codes: GLFW's for letters are their ASCII
  // capitals.
  if (ImGui::IsKeyPressed('W')) zoom(0.8);
  if (ImGui::IsKeyPressed('S')) zoom(1.25);
  const int64_t tenth = static_cast<int64_t>(f.canvas_w * window_.ns_per_px / 10);
  if (ImGui::IsKeyPressed('A')) window_.t0_ns -= tenth;
  if (ImGui::IsKeyPressed('D')) window_.t0_ns += tenth;
  if (!io.KeyCtrl && ImGui::IsKeyPressed('F', false)) request_fit_all();
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false)) select(trace, EventRef{});
  if (io.KeyCtrl && ImGui::IsKeyPressed('F', false)) focus_search_ = true;
  if (!io.KeyCtrl && ImGui::IsKeyPressed('N', false)) go_to_match(trace, true);
  if (!io.KeyCtrl && ImGui::IsKeyPressed('P', false)) go_to_match(trace, false);
}

void TimelineView::keep_trace_in_view(const TimelineIndex& index, double width_px) {
  if (index.t_max <= index.t_min || width_px <= 0) return;
  const double span = double(index.t_max - index.t_min);
  const double margin = span * 0.05;
  const double widest = std::max(kMinNsPerPx, (span + 2 * margin) / width_px);
  if (window_.ns_per_px >= widest) {  // all of it: the whole trace and its margins
    window_.ns_per_px = widest;
    window_.t0_ns = static_cast<int64_t>(index.t_min - margin);
    return;
  }
  // At least a tenth of the view, or the whole trace when it is smaller, shows the trace.
  const double view = width_px * window_.ns_per_px;
  const double keep = std::min(view, span) / 10;
  const double lowest = index.t_min - view + keep - margin, highest = index.t_max - keep + margin;
  window_.t0_ns = static_cast<int64_t>(std::clamp(double(window_.t0_ns), lowest, highest));
}

// The background, then the time axis's ticks and the step markers over the whole height.
void TimelineView::draw_time_axis(const Frame& f, const TimelineIndex& index) {
  ImDrawList* dl = f.dl;
  const ImVec2 origin = f.origin, avail = f.avail;
  dl->AddRectFilled(ImVec2(origin.x, origin.y), ImVec2(origin.x + avail.x, origin.y + avail.y),
                    0xFF1E1A18);

  const double step_ns = tick_step_ns(window_.ns_per_px, 110);
  const int64_t first_tick =
      static_cast<int64_t>(std::ceil((window_.t0_ns - index.t_min) / step_ns) * step_ns);
  dl->PushClipRect(f.clip_min, f.clip_max, true);
  for (double t = first_tick; window_.x_of(index.t_min + int64_t(t)) < f.canvas_w; t += step_ns) {
    const float x = canvas_x_ + static_cast<float>(window_.x_of(index.t_min + int64_t(t)));
    dl->AddLine(ImVec2(x, origin.y + kAxisHeight - 6), ImVec2(x, origin.y + avail.y), 0x30FFFFFF);
    dl->AddText(ImVec2(x + 3, origin.y + 2), 0xFFB0B0B0, tick_label(t, step_ns).c_str());
  }
  // Step markers, by the steps' own numbers: every step when there is room, else every
  // stride-th (labels sparser still), so thousands of steps do not make a curtain.
  const int line_stride = step_stride(index.steps, window_.ns_per_px, 8);
  const int label_stride = step_stride(index.steps, window_.ns_per_px, 70);
  drawn_step_marks_ = 0;
  auto step_it = std::partition_point(index.steps.begin(), index.steps.end(),
                                      [&](const auto& s) { return window_.x_of(s.t0_ns) < -200; });
  for (; step_it != index.steps.end() && window_.x_of(step_it->t0_ns) <= f.canvas_w; ++step_it) {
    if (step_it->step % line_stride != 0) continue;
    ++drawn_step_marks_;
    const float sx = canvas_x_ + static_cast<float>(window_.x_of(step_it->t0_ns));
    const bool labelled = step_it->step % label_stride == 0;
    // Unlabelled markers start below the labels' band, so they do not strike through them.
    dl->AddLine(ImVec2(sx, origin.y + (labelled ? 12 : kAxisHeight)),
                ImVec2(sx, origin.y + avail.y), 0xA000D7FF, 1.5f);
    if (labelled) {
      dl->AddText(ImVec2(sx + 3, origin.y + 11), 0xFF00D7FF,
                  ("step " + std::to_string(step_it->step)).c_str());
    }
  }
  dl->PopClipRect();
}

// The rank's rows, each labelled with its lane where the lane changes.
void TimelineView::draw_lanes(const Frame& f, const Trace& trace, const TimelineIndex& index,
                              RankBand* band, std::vector<TimelineMark>* marks) {
  const auto& rank = trace.ranks[band->index];
  int last_lane = -1;
  for (size_t& r = band->next_row;
       r < index.rows.size() && index.rows[r].rank == static_cast<int>(band->index); ++r) {
    const TimelineRow& row = index.rows[r];
    const float y = band->y;
    row_top_[r] = y;
    if (row.lane == profiling::kHostLane) band->host_bottom = y + row_height_;
    // A lane's label where the lane begins, unless the rows are thinner than the text and the
    // label above still covers this row (many thin lanes: a real GPU trace's streams).
    if (row.lane != last_lane && y + 1 >= band->labels_free_from) {
      const std::string lane = row.lane < static_cast<int>(rank.lanes.size())
                                   ? rank.lanes[row.lane]
                                   : "lane " + std::to_string(row.lane);
      f.dl->AddText(ImVec2(f.origin.x + lane_label_x_, y + 1), 0xFFA0A0A0, lane.c_str());
      band->labels_free_from = y + 1 + ImGui::GetFontSize();
    }
    last_lane = row.lane;
    layout_row(rank, row, window_, f.canvas_w, kFoldPx, marks);
    f.dl->PushClipRect(f.clip_min, f.clip_max, true);
    draw_marks(f, trace, index, *band, *marks);
    // Exposed communication: a red underline on the first communication row.
    if (row.lane == profiling::kCommLane && row.depth == 0) {
      draw_exposed_comm(f, index.exposed_comm[band->index], y);
    }
    f.dl->PopClipRect();
    band->y += row_height_;
  }
}

// One row's events (or folds of them) at band.y, with their names where they fit; notes the
// one under the mouse.
void TimelineView::draw_marks(const Frame& f, const Trace& trace, const TimelineIndex& index,
                              const RankBand& band, const std::vector<TimelineMark>& marks) {
  const auto& rank = trace.ranks[band.index];
  const float y = band.y;
  for (const auto& m : marks) {
    const Event& e = rank.events[m.event];
    const float x0 = canvas_x_ + static_cast<float>(std::max(m.x0, -10.0));
    const float x1 =
        canvas_x_ + static_cast<float>(std::min(std::max(m.x1, m.x0 + 1), f.canvas_w + 10.0));
    ImU32 colour = m.count > 1 ? kFoldColour : category_colour(e.category);
    if (m.count == 1 && e.category == Category::kBackward &&
        e.name < index.weight_pass_names.size() && index.weight_pass_names[e.name])
      colour = kWeightPassColour;
    // A pipeline pass: its stage's shade, and "F s2 mb3" for a label (the full name on hover).
    const profiling::PassLabel* pass =
        m.count == 1 && e.name < index.pass_labels.size() && !index.pass_labels[e.name].text.empty()
            ? &index.pass_labels[e.name]
            : nullptr;
    if (pass != nullptr) colour = stage_shade(colour, pass->stage);
    if (!search.empty() && (m.count > 1 || trace.str(e.name).find(search) == std::string::npos)) {
      colour = dimmed(colour);
    }
    f.dl->AddRectFilled(ImVec2(x0, y + 1), ImVec2(x1, y + row_height_ - 1), colour);
    // The label at the visible start of the span: one cut at the left edge stays readable.
    if (double tx = 0;
        m.count == 1 && row_height_ >= 12 && label_x(m.x0, m.x1, f.canvas_w, 40, &tx)) {
      const bool tight = pass != nullptr &&
                         ImGui::CalcTextSize(pass->text.c_str()).x > m.x1 - std::max(m.x0, 0.0) - 4;
      const std::string& name = pass == nullptr ? trace.str(e.name)
                                : tight         ? pass->compact
                                                : pass->text;
      f.dl->PushClipRect(ImVec2(std::max(x0, canvas_x_), y), ImVec2(x1, y + row_height_), true);
      f.dl->AddText(
          ImVec2(canvas_x_ + static_cast<float>(tx), y + (row_height_ - ImGui::GetFontSize()) / 2),
          0xFF000000, name.c_str());
      f.dl->PopClipRect();
    }
    ++drawn_marks_;
    if (m.count > 1) ++folded_marks_;
    if (f.hovered && f.mouse.y >= y && f.mouse.y < y + row_height_ && f.mouse.x >= x0 - 1 &&
        f.mouse.x <= x1 + 1) {
      hovered_ = EventRef{static_cast<int>(band.index), m.event, m.count};
    }
  }
}

// `exposed` (merged, sorted intervals) as a red underline at the bottom of the row at `y`.
void TimelineView::draw_exposed_comm(const Frame& f, const profiling::Intervals& exposed,
                                     float y) const {
  auto it = std::partition_point(exposed.begin(), exposed.end(),
                                 [&](const auto& iv) { return iv.second <= window_.t0_ns; });
  const int64_t t_hi = window_.t_of(f.canvas_w);
  while (it != exposed.end() && it->first < t_hi) {
    const double a = std::max(window_.x_of(it->first), -1.0);
    double b = std::min(window_.x_of(it->second), f.canvas_w + 1.0);
    // Intervals that end within the same pixel are one mark: jump past them at once.
    const int64_t pixel_end = window_.t_of(std::floor(std::max(a, b)) + 1);
    auto next = std::partition_point(it, exposed.end(),
                                     [&](const auto& iv) { return iv.second <= pixel_end; });
    if (next == it) ++next;
    b = std::max(b, std::min(window_.x_of(std::prev(next)->second), f.canvas_w + 1.0));
    it = next;
    const float x0 = canvas_x_ + static_cast<float>(a);
    const float x1 = canvas_x_ + static_cast<float>(b);
    f.dl->AddRectFilled(ImVec2(x0, y + row_height_ - 4),
                        ImVec2(std::max(x1, x0 + 1), y + row_height_), kExposedCommColour);
  }
}

// A pipeline's bubble, shaded over the rank's host rows; then the rank's figures per step, one
// row below its lanes.
void TimelineView::draw_step_figures(const Frame& f, const TimelineIndex& index, RankBand* band) {
  const size_t rank_index = band->index;
  const float y = band->y;
  f.dl->AddText(ImVec2(f.origin.x + lane_label_x_, y + 1), 0xFFA0A0A0, "per step");
  f.dl->PushClipRect(f.clip_min, f.clip_max, true);
  if (bubble_formula_ >= 0 && rank_index < index.pipeline_idle.size()) {
    draw_bubble(f.dl, index.pipeline_idle[rank_index], window_,
                Strip{canvas_x_, f.canvas_w, band->top + 1, band->host_bottom - band->top - 1});
  }
  if (rank_index < index.step_figures.size()) {
    const auto& figures = index.step_figures[rank_index];
    const bool failed = rank_index < index.rank_failed.size() && index.rank_failed[rank_index];
    if (const auto* fig = draw_figures_row(
            f.dl, figures, index.steps, window_, Strip{canvas_x_, f.canvas_w, y, row_height_},
            bubble_formula_, f.mouse.x, f.mouse.y,
            live_ && !index.steps.empty() ? index.steps.back().step : -1,
            failed && !figures.empty() ? figures.back().step : -1);
        fig != nullptr && f.hovered) {
      hovered_figures_ = *fig;
      hovered_figures_valid_ = true;
      hovered_figures_failed_ = failed && fig->step == figures.back().step;
    }
  }
  f.dl->PopClipRect();
  band->y += row_height_;
}

// Memory strip: what the rank held, scaled to the largest peak of any rank; then the gap before
// the next rank.
void TimelineView::draw_rank_memory(const Frame& f, const Trace& trace, const TimelineIndex& index,
                                    int64_t memory_scale, RankBand* band) const {
  const size_t rank_index = band->index;
  const float y = band->y;
  const float strip = row_height_ * kMemoryStrip;
  if (rank_index < index.memory.size()) {
    draw_memory_strip(f.dl, index.memory[rank_index], memory_scale, window_,
                      Strip{canvas_x_, f.canvas_w, y, strip}, f.origin.x + 4);
    if (f.hovered && f.mouse.y >= y && f.mouse.y < y + strip && f.mouse_x >= 0) {
      const int64_t t = window_.t_of(f.mouse_x);
      const int64_t held = held_at(index.memory[rank_index], t);
      if (held >= 0) {
        ImGui::SetTooltip("rank %d held %s at %s (its peak %s)", trace.ranks[rank_index].rank,
                          format_bytes(double(held)).c_str(),
                          format_ms((t - index.t_min) * 1e-6).c_str(),
                          format_bytes(double(index.memory_peak[rank_index])).c_str());
      }
    }
  }
  band->y += strip + kRankGap * row_height_;
}

// A failed rank's band framed, in red for the failure that stopped the run (`root`) and amber
// for the ranks it stopped, with the first line of the reason; all of it on hover.
void TimelineView::draw_failure(const Frame& f, const profiling::RankTrace& rank,
                                const RankBand& band, bool root) const {
  const ImU32 failure_colour = root ? kFailedColour : kStoppedColour;
  const float y = band.y;
  f.dl->AddRect(ImVec2(f.origin.x + 1, band.top), ImVec2(f.origin.x + f.avail.x - 1, y),
                failure_colour, 0, 0, 2.0f);
  f.dl->AddText(ImVec2(f.origin.x + 4, band.top + ImGui::GetFontSize()), failure_colour,
                root ? "failed" : "stopped");
  const std::string reason = rank.failure.substr(0, rank.failure.find('\n'));
  // On a dark band, so it reads over the memory strip it sits on.
  const ImVec2 at(canvas_x_ + 4, y - ImGui::GetFontSize() - 2);
  const ImVec2 size = ImGui::CalcTextSize(reason.c_str());
  f.dl->PushClipRect(f.clip_min, f.clip_max, true);
  f.dl->AddRectFilled(ImVec2(at.x - 2, at.y - 1), ImVec2(at.x + size.x + 2, at.y + size.y + 1),
                      0xE0181818);
  f.dl->AddText(at, failure_colour, reason.c_str());
  f.dl->PopClipRect();
  if (ImGui::IsMouseHoveringRect(ImVec2(f.origin.x, band.top), ImVec2(canvas_x_, y))) {
    ImGui::SetTooltip("rank %d failed: %s", rank.rank, rank.failure.c_str());
  }
}

// Selection, the links between the ranks' copies of a collective, and the measured range down
// to `bottom`.
void TimelineView::draw_selection_and_links(const Frame& f, const Trace& trace,
                                            const TimelineIndex& index, float bottom) const {
  ImDrawList* dl = f.dl;
  auto outline = [&](EventRef ref, ImU32 colour) {
    const int row = row_of(trace, index, ref);
    if (row < 0) return ImVec2(-1, -1);
    const Event& e = trace.ranks[ref.rank].events[ref.event];
    const float x0 = canvas_x_ + static_cast<float>(std::max(window_.x_of(e.t0_ns), -5.0));
    const float x1 =
        canvas_x_ + static_cast<float>(std::min(window_.x_of(e.t1_ns), f.canvas_w + 5.0));
    const float ty = row_top_[row];
    dl->AddRect(ImVec2(x0 - 1, ty), ImVec2(std::max(x1, x0 + 1) + 1, ty + row_height_), colour, 0,
                0, 2.0f);
    return ImVec2(x0, ty + row_height_ / 2);
  };
  dl->PushClipRect(f.clip_min, f.clip_max, true);
  if (selected_.valid()) outline(selected_, kSelectionColour);
  ImVec2 previous(-1, -1);
  for (const auto& l : linked_) {
    const ImVec2 at = outline(l, 0xFF00FFFF);
    if (previous.x >= 0 && at.x >= 0) {
      dl->AddLine(previous, at, 0xFF00FFFF, 2.0f);
      if (linked_point_to_point_) draw_arrow_head(dl, previous, at, 0xFF00FFFF);
    }
    previous = at;
  }
  if (measure_[0] != measure_[1]) {
    const float a =
        canvas_x_ + static_cast<float>(window_.x_of(std::min(measure_[0], measure_[1])));
    const float b =
        canvas_x_ + static_cast<float>(window_.x_of(std::max(measure_[0], measure_[1])));
    dl->AddRectFilled(ImVec2(a, f.top), ImVec2(b, bottom), 0x40FFFF00);
    dl->AddText(ImVec2(b + 4, f.top + 2), 0xFF00FFFF,
                format_ms(std::fabs(double(measure_[1] - measure_[0])) * 1e-6).c_str());
    if (!measuring_) draw_range_totals(dl, trace, index, b + 4);
  }
  dl->PopClipRect();
}

// The hovered step's figures or event's details in a tooltip; a click without a drag selects.
void TimelineView::draw_hover(const Frame& f, const Trace& trace, const TimelineIndex& index) {
  if (hovered_figures_valid_ && !hovered_.valid()) {
    ImGui::SetTooltip(
        "step %d on rank %d: %s\n(medians over steps: shardscope report)", hovered_figures_.step,
        hovered_figures_.rank,
        step_figures_text(hovered_figures_, bubble_formula_, false, false, hovered_figures_failed_)
            .c_str());
  }
  if (hovered_.valid() && !ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f)) {
    const auto d = describe(trace, index, hovered_);
    ImGui::BeginTooltip();
    if (hovered_.folded > 1) {
      ImGui::Text("%u events folded (zoom in to see them); first:", hovered_.folded);
    }
    ImGui::Text("%s", d["name"].get<std::string>().c_str());
    ImGui::Text("rank %d, lane %s, %s", d["rank"].get<int>(), d["lane"].get<std::string>().c_str(),
                d["category"].get<std::string>().c_str());
    ImGui::Text("start %s, duration %s", format_ms(d["start_ms"]).c_str(),
                format_ms(d["duration_ms"]).c_str());
    if (d.contains("off_core_ms")) {
      ImGui::Text("off its core %s of it: waits, or preempted (which device time leaves out)",
                  format_ms(d["off_core_ms"]).c_str());
    }
    if (d.contains("bytes")) {
      ImGui::Text("%s in group %s (seq %lld)", format_bytes(d["bytes"].get<double>()).c_str(),
                  d["group"].get<std::string>().c_str(),
                  static_cast<long long>(d["seq"].get<int64_t>()));
    }
    if (d.contains("copied_bytes")) {
      ImGui::Text("%s copied%s", format_bytes(d["copied_bytes"].get<double>()).c_str(),
                  d.contains("copy_gbps")
                      ? (" at " + profiling::format_gbps(d["copy_gbps"].get<double>())).c_str()
                      : "");
    }
    if (d.contains("busbw_gbps"))
      ImGui::Text("busbw %s", profiling::format_gbps(d["busbw_gbps"].get<double>()).c_str());
    ImGui::EndTooltip();
  }
  if (f.released && ImGui::GetIO().MouseDragMaxDistanceSqr[0] < 16 &&
      ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
    select(trace, hovered_);
  }
}

}  // namespace shardscope::gui
