#include "app/gui/timeline_figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>

#include "app/gui/timeline_ticks.h"

namespace shardscope::gui {

std::string step_figures_text(const profiling::StepMetrics& m, double bubble_formula, bool compact,
                              bool in_progress, bool failed) {
  if (in_progress) return compact ? "running" : "step in progress";
  if (failed) return compact ? "failed" : "the rank failed in this step: its figures end there";
  char buf[160];
  std::string text;
  if (bubble_formula >= 0) {
    std::snprintf(buf, sizeof(buf),
                  compact ? "bubble %.0f %% (%.0f %%)" : "bubble %.1f %% (formula %.1f %%)",
                  100 * m.bubble_fraction(), 100 * bubble_formula);
    text = buf;
    text += compact ? " " : ", ";
  }
  if (m.comm_ns <= 0) return text + "no communication";
  std::snprintf(buf, sizeof(buf),
                compact ? "%.0f %% | %.2f ms" : "overlap %.0f %%, exposed comm %.3f ms",
                100 * m.overlap_fraction(), m.exposed_comm_ns * 1e-6);
  text += buf;
  if (!compact && m.peer_wait_ns > 0) {
    // Sends and receives waiting for the other stage: in the bubble, not the exposed figure.
    std::snprintf(buf, sizeof(buf), ", %.3f ms waiting for the other stage", m.peer_wait_ns * 1e-6);
    text += buf;
  }
  return text;
}

const profiling::StepMetrics* draw_figures_row(ImDrawList* dl,
                                               const std::vector<profiling::StepMetrics>& figures,
                                               const std::vector<StepSpan>& steps,
                                               const TimeWindow& window, const Strip& strip,
                                               double bubble_formula, float mouse_x, float mouse_y,
                                               int in_progress, int failed_step) {
  const profiling::StepMetrics* hovered = nullptr;
  const int64_t t_hi = window.t_of(strip.canvas_w);
  auto it = std::partition_point(steps.begin(), steps.end(),
                                 [&](const StepSpan& s) { return s.t1_ns <= window.t0_ns; });
  for (; it != steps.end() && it->t0_ns < t_hi; ++it) {
    auto m =
        std::lower_bound(figures.begin(), figures.end(), it->step,
                         [](const profiling::StepMetrics& f, int step) { return f.step < step; });
    if (m == figures.end() || m->step != it->step) continue;
    const double x0 = window.x_of(it->t0_ns), x1 = window.x_of(it->t1_ns);
    const float sx0 = strip.canvas_x + static_cast<float>(std::max(x0, 0.0));
    const float sx1 = strip.canvas_x + static_cast<float>(std::min(x1, double(strip.canvas_w)));
    if (mouse_y >= strip.y && mouse_y < strip.y + strip.height && mouse_x >= sx0 && mouse_x < sx1) {
      hovered = &*m;
    }
    double at = 0;
    if (!label_x(x0, x1, strip.canvas_w, 30, &at)) continue;
    const double room = std::min(x1, double(strip.canvas_w)) - at - 3;
    const bool running = it->step == in_progress;
    const bool failed = it->step == failed_step;
    std::string text = step_figures_text(*m, bubble_formula, false, running, failed);
    if (ImGui::CalcTextSize(text.c_str()).x > room)
      text = step_figures_text(*m, bubble_formula, true, running, failed);
    dl->AddRectFilled(ImVec2(sx0, strip.y + 1), ImVec2(sx1, strip.y + strip.height - 1),
                      0x30FFFFFF);
    dl->PushClipRect(ImVec2(sx0, strip.y), ImVec2(sx1, strip.y + strip.height), true);
    dl->AddText(ImVec2(strip.canvas_x + static_cast<float>(at),
                       strip.y + (strip.height - ImGui::GetFontSize()) / 2),
                0xFFE0E0E0, text.c_str());
    dl->PopClipRect();
  }
  return hovered;
}

void draw_bubble(ImDrawList* dl, const profiling::Intervals& idle, const TimeWindow& window,
                 const Strip& strip) {
  auto it = std::partition_point(idle.begin(), idle.end(),
                                 [&](const auto& iv) { return iv.second <= window.t0_ns; });
  const int64_t t_hi = window.t_of(strip.canvas_w);
  for (; it != idle.end() && it->first < t_hi; ++it) {
    const float x0 = strip.canvas_x + static_cast<float>(std::max(window.x_of(it->first), -1.0));
    const float x1 = strip.canvas_x +
                     static_cast<float>(std::min(window.x_of(it->second), strip.canvas_w + 1.0));
    if (x1 - x0 < 1) continue;
    const ImVec2 a(x0, strip.y), b(x1, strip.y + strip.height);
    dl->AddRectFilled(a, b, kBubbleColour);
    // Diagonal hatching, so the bubble reads as "nothing here" over whatever spans it covers.
    dl->PushClipRect(a, b, true);
    for (float x = x0 - strip.height; x < x1; x += 8) {
      dl->AddLine(ImVec2(x, b.y), ImVec2(x + strip.height, a.y), 0x40FFFFFF);
    }
    dl->PopClipRect();
  }
}

void draw_memory_strip(ImDrawList* dl, const std::vector<std::pair<int64_t, int64_t>>& samples,
                       int64_t scale_bytes, const TimeWindow& window, const Strip& strip,
                       float gutter_x) {
  // The scale: the strip's top is the largest peak of any rank; a faint line marks it.
  const std::string scale =
      samples.empty() ? std::string("memory") : "memory 0-" + format_bytes(double(scale_bytes));
  dl->AddText(ImVec2(gutter_x, strip.y + 1), 0xFFA0A0A0, scale.c_str());
  dl->AddLine(ImVec2(strip.canvas_x, strip.y), ImVec2(strip.canvas_x + strip.canvas_w, strip.y),
              0x30C8A064);
  std::vector<float> bytes_per_px;
  layout_memory(samples, window, strip.canvas_w, &bytes_per_px);
  for (size_t x = 0; x < bytes_per_px.size(); ++x) {
    if (bytes_per_px[x] < 0) continue;
    const float h = strip.height * static_cast<float>(bytes_per_px[x] / double(scale_bytes));
    dl->AddRectFilled(ImVec2(strip.canvas_x + x, strip.y + strip.height - h),
                      ImVec2(strip.canvas_x + x + 1, strip.y + strip.height), 0xFFC8A064);
  }
}

}  // namespace shardscope::gui
