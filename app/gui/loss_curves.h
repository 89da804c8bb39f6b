#pragma once

#include <string>
#include <vector>

#include "app/gui/line_chart.h"
#include "profiling/trace/run_record.h"

namespace shardscope::gui {

// The loss chart of the Weight sync window: each rank's own loss per step, and the reference's.
struct LossCurves {
  std::vector<ChartSeries> series;
  // Ranks that compute no loss (pipeline stages before the last), left out of the chart: their
  // recorded 0.0 is not a loss.
  std::vector<int> left_out;
};

// From a run's result: its ranks' losses, whether each rank reports a loss (run_record.h reads
// that for traces from before it was recorded) and the reference's losses. Losses that were not
// numbers are left out.
LossCurves loss_curves(const profiling::RunResult& result);

}  // namespace shardscope::gui
