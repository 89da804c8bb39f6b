#include "app/gui/loss_curves.h"

#include <cmath>

#include "app/gui/gui_style.h"

namespace shardscope::gui {
namespace {

ChartSeries series_of(const std::string& label, uint32_t colour, const std::vector<double>& y) {
  ChartSeries s;
  s.label = label;
  s.colour = colour;
  for (size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) continue;  // a loss that was no number is a gap in the line
    s.x.push_back(static_cast<float>(i));
    s.y.push_back(static_cast<float>(y[i]));
  }
  return s;
}

}  // namespace

LossCurves loss_curves(const profiling::RunResult& result) {
  LossCurves curves;
  for (size_t r = 0; r < result.rank_losses.size(); ++r) {
    if (r < result.reports_loss.size() && !result.reports_loss[r]) {
      curves.left_out.push_back(static_cast<int>(r));
      continue;
    }
    curves.series.push_back(series_of("rank " + std::to_string(r), rank_colour(static_cast<int>(r)),
                                      result.rank_losses[r]));
  }
  if (result.reference && !result.reference->losses.empty())
    curves.series.push_back(series_of("reference", 0xFFFFFFFF, result.reference->losses));
  return curves;
}

}  // namespace shardscope::gui
