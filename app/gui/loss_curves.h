#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "app/gui/line_chart.h"

namespace shardscope::gui {

// The loss chart of the Weight sync window: each rank's own loss per step, and the reference's.
struct LossCurves {
  std::vector<ChartSeries> series;
  // Ranks that compute no loss (pipeline stages before the last), left out of the chart: their
  // recorded 0.0 is not a loss.
  std::vector<int> left_out;
};

// From a run's result (Trace::run_json's "result"): its `rank_losses`, `reports_loss` (per rank;
// traces from before it was recorded: a rank whose losses are all exactly 0 reports none, as a
// cross-entropy of real tokens never is) and the reference's losses.
LossCurves loss_curves(const nlohmann::json& result);

}  // namespace shardscope::gui
