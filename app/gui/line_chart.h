#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope::gui {

struct ChartSeries {
  std::string label;
  uint32_t colour = 0xFFFFFFFF;
  std::vector<float> x, y;
  // A quantity that holds its value until the next sample (memory held): drawn as steps, never
  // as ramps that would show memory no block ever held.
  bool held = false;
};

// A vertical mark at x, with a label where there is room: where each step began.
struct ChartMark {
  float x = 0;
  std::string label;
};

// A small line chart drawn with ImDrawList: shared axes over every series, a legend, the y range
// printed at the left and, with `x_unit`, ticks along the x axis; `marks` as the timeline draws
// its steps. Used for memory over time and loss curves.
void line_chart(const char* id, const std::vector<ChartSeries>& series, float width, float height,
                const char* y_unit, const char* x_unit = nullptr,
                const std::vector<ChartMark>& marks = {});

}  // namespace shardscope::gui
