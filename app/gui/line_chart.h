#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::gui {

struct ChartSeries {
  std::string label;
  uint32_t colour = 0xFFFFFFFF;
  std::vector<float> x, y;
};

// A small line chart drawn with ImDrawList: shared axes over every series, a legend, the y range
// printed at the left. Used for memory over time and loss curves.
void line_chart(const char* id, const std::vector<ChartSeries>& series, float width, float height,
                const char* y_unit);

}  // namespace shardscope::gui
