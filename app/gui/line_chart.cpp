#include "app/gui/line_chart.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include <imgui.h>

namespace shardscope::gui {

void line_chart(const char* id, const std::vector<ChartSeries>& series, float width, float height,
                const char* y_unit, const char* x_unit, const std::vector<ChartMark>& marks) {
  ImGui::PushID(id);
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::Dummy(ImVec2(width, height));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float left = 70, bottom = 18;
  const ImVec2 a(p.x + left, p.y + 4), b(p.x + width - 4, p.y + height - bottom);
  dl->AddRectFilled(p, ImVec2(p.x + width, p.y + height), 0xFF1E1A18);
  dl->AddRect(a, b, 0x60FFFFFF);
  float x_lo = std::numeric_limits<float>::max(), x_hi = std::numeric_limits<float>::lowest();
  float y_lo = x_lo, y_hi = x_hi;
  for (const auto& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]);
      y_hi = std::max(y_hi, s.y[i]);
    }
  }
  if (x_lo > x_hi) {
    dl->AddText(ImVec2(a.x + 8, a.y + 8), 0xFFA0A0A0, "no data");
    ImGui::PopID();
    return;
  }
  if (x_hi == x_lo) x_hi = x_lo + 1;
  const float pad = (y_hi - y_lo) * 0.05f + 1e-6f;
  y_lo = y_lo >= 0 ? std::max(0.0f, y_lo - pad) : y_lo - pad;
  y_hi += pad;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g %s", y_hi, y_unit);
  dl->AddText(ImVec2(p.x + 2, a.y), 0xFFB0B0B0, buf);
  std::snprintf(buf, sizeof(buf), "%.4g %s", y_lo, y_unit);
  dl->AddText(ImVec2(p.x + 2, b.y - ImGui::GetFontSize()), 0xFFB0B0B0, buf);
  auto to_screen = [&](float x, float y) {
    return ImVec2(a.x + (x - x_lo) / (x_hi - x_lo) * (b.x - a.x),
                  b.y - (y - y_lo) / (y_hi - y_lo) * (b.y - a.y));
  };
  if (x_unit != nullptr) {
    // Five ticks along the bottom, inside the plot (the legend is below it).
    for (int i = 0; i <= 4; ++i) {
      const float x = x_lo + (x_hi - x_lo) * i / 4;
      const ImVec2 at = to_screen(x, y_lo);
      dl->AddLine(ImVec2(at.x, b.y), ImVec2(at.x, b.y - 4), 0x80FFFFFF);
      std::snprintf(buf, sizeof(buf), i == 4 ? "%.4g %s" : "%.4g", x, x_unit);
      const float w = ImGui::CalcTextSize(buf).x;
      const float tx = std::clamp(at.x - w / 2, a.x + 2, b.x - w - 2);
      dl->AddText(ImVec2(tx, b.y - 4 - ImGui::GetFontSize()), 0xFF909090, buf);
    }
  }
  // The marks behind the lines, labelled left to right wherever the last label leaves room.
  float free_from = a.x;
  for (const auto& m : marks) {
    if (m.x < x_lo || m.x > x_hi) continue;
    const float sx = to_screen(m.x, y_lo).x;
    dl->AddLine(ImVec2(sx, a.y), ImVec2(sx, b.y), 0x7000D7FF, 1.0f);
    if (!m.label.empty() && sx >= free_from) {
      dl->AddText(ImVec2(sx + 3, a.y + 1), 0xFF00D7FF, m.label.c_str());
      free_from = sx + 3 + ImGui::CalcTextSize(m.label.c_str()).x + 6;
    }
  }
  float legend_x = a.x + 6;
  for (const auto& s : series) {
    std::vector<ImVec2> points;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      const ImVec2 at = to_screen(s.x[i], s.y[i]);
      if (s.held && !points.empty()) points.push_back(ImVec2(at.x, points.back().y));
      points.push_back(at);
    }
    if (points.size() == 1) dl->AddCircleFilled(points[0], 3, s.colour);
    if (points.size() > 1)
      dl->AddPolyline(points.data(), static_cast<int>(points.size()), s.colour, 0, 1.5f);
    dl->AddRectFilled(ImVec2(legend_x, b.y + 5), ImVec2(legend_x + 10, b.y + 15), s.colour);
    dl->AddText(ImVec2(legend_x + 13, b.y + 2), 0xFFD0D0D0, s.label.c_str());
    legend_x += 24 + ImGui::CalcTextSize(s.label.c_str()).x;
  }
  ImGui::PopID();
}

}  // namespace shardscope::gui
