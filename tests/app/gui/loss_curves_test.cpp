// Pipeline stages that compute no loss are left out of the loss chart (they recorded 0.0).
#include "app/gui/loss_curves.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/launch/stop_request.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "profiling/trace/run_record_json.h"

namespace shardscope::gui {
namespace {

// A real pipeline run: only the last stage has a loss curve, and it is the reference's (the
// single device on the same batches), step by step.
TEST(LossCurves, PipelineRunShowsOnlyTheLastStage) {
  Config config = config_from_json(
      {{"preset", "tiny"}, {"world", 2}, {"strategy", "pp"}, {"steps", 3}, {"tracing", false}});
  finalize(config);
  clear_stop_request();  // a GUI test before this one in the binary may have pressed Stop
  const RunSummary summary = run_training(config);
  ASSERT_TRUE(summary.ok) << summary.failure;
  ASSERT_TRUE(summary.trace.run.result.has_value());
  const auto result = profiling::run_result_json(*summary.trace.run.result);
  EXPECT_EQ(result["reports_loss"], nlohmann::json({false, true}));
  const LossCurves curves = loss_curves(profiling::run_result_of(result));
  EXPECT_EQ(curves.left_out, std::vector<int>{0});
  ASSERT_EQ(curves.series.size(), 2u) << result.dump();  // rank 1 and the reference
  EXPECT_EQ(curves.series[0].label, "rank 1");
  EXPECT_EQ(curves.series[1].label, "reference");
  ASSERT_EQ(curves.series[0].y.size(), 3u) << result.dump();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GT(curves.series[0].y[i], 1.0f);  // a cross-entropy over 256 tokens, not 0.0
    EXPECT_NEAR(curves.series[0].y[i], curves.series[1].y[i], 1e-4) << "step " << i;
  }
}

// Data-parallel ranks all compute a loss: all are drawn.
TEST(LossCurves, EveryDataParallelRankIsDrawn) {
  const nlohmann::json result = {{"rank_losses", {{5.5, 5.4}, {5.6, 5.3}}},
                                 {"reports_loss", {true, true}}};
  const LossCurves curves = loss_curves(profiling::run_result_of(result));
  EXPECT_TRUE(curves.left_out.empty());
  EXPECT_EQ(curves.series.size(), 2u);
}

// Traces recorded before `reports_loss`: a rank whose losses are all exactly 0 computed none.
TEST(LossCurves, OlderTracesLeaveOutRanksThatOnlyRecordedZero) {
  const nlohmann::json result = {{"rank_losses", {{0.0, 0.0}, {5.6, 5.3}}}};
  const LossCurves curves = loss_curves(profiling::run_result_of(result));
  EXPECT_EQ(curves.left_out, std::vector<int>{0});
  ASSERT_EQ(curves.series.size(), 1u);
  EXPECT_EQ(curves.series[0].label, "rank 1");
}

}  // namespace
}  // namespace shardscope::gui
