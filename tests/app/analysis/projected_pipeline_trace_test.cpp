// A projected pipeline drawn as a trace (issue 34's 175B timeline): the app finds its schedule and
// bubble formula as for a recorded run's, the file keeps them, and its bubble is the idle time
// between stages, not the tensor group's collectives inside a pass (they once read as bubble:
// 24 % against the formula's 3.5 % for Megatron's 175B layout).
#include <gtest/gtest.h>

#include <vector>

#include <nlohmann/json.hpp>

#include "app/analysis/configuration_projection.h"
#include "app/analysis/trace_figures.h"
#include "engine/train/config.h"
#include "profiling/io/trace_io.h"
#include "profiling/metrics/step_figures.h"

namespace shardscope::analysis {
namespace {

profiling::Trace projected_pipeline(int tp) {
  Config c = config_from_json(nlohmann::json{{"strategy", "hybrid"},
                                             {"world", 4 * tp},
                                             {"model",
                                              {{"layers", 16},
                                               {"d_model", 4096},
                                               {"heads", 32},
                                               {"seq", 2048},
                                               {"vocab", 51200},
                                               {"tie_embeddings", false}}},
                                             {"global_batch", 8},
                                             {"strategy_options",
                                              {{"precision", "bf16"},
                                               {"tensor_parallel", tp},
                                               {"pipeline_parallel", 4},
                                               {"micro_batches", 8},
                                               {"schedule", "1f1b"},
                                               {"sequence_parallel", tp > 1}}}});
  const ConfigurationProjection p =
      project_configuration(c, profiling::load_hardware_profile("8xH100"), 1, /*draw=*/true);
  EXPECT_FALSE(p.trace.ranks.empty()) << p.undrawn;
  return p.trace;
}

TEST(ProjectedPipelineTrace, CarriesItsScheduleAndFormulaThroughItsFile) {
  const profiling::Trace drawn = projected_pipeline(1);
  const profiling::Trace reread = profiling::from_native(profiling::to_native(drawn));
  for (const profiling::Trace* t : {&drawn, &reread}) {
    const auto pipeline = pipeline_of_run(t->run);
    ASSERT_TRUE(pipeline.has_value());
    EXPECT_EQ(pipeline->stages, 4);
    EXPECT_EQ(pipeline->micro_batches, 8);
    EXPECT_EQ(pipeline->schedule, "1f1b");
    EXPECT_DOUBLE_EQ(pipeline->formula, 3.0 / 11);
    ASSERT_EQ(pipeline->stage_of_rank.size(), 4u);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(pipeline->stage_of_rank[r], r);
  }
}

TEST(ProjectedPipelineTrace, ItsBubbleIsTheIdleBetweenStagesNotTheTensorGroupsCollectives) {
  const double formula = 3.0 / 11;
  std::vector<double> bubble[2];
  for (const int tp : {1, 2}) {
    const profiling::RunFigures figures =
        profiling::run_figures(profiling::step_metrics(projected_pipeline(tp)), false);
    ASSERT_EQ(figures.ranks.size(), 4u);
    double mean = 0;
    for (const auto& rank : figures.ranks) {
      bubble[tp - 1].push_back(rank.bubble_fraction);
      mean += rank.bubble_fraction / 4;
    }
    // The fill and drain the formula counts, and more: the last stage's LM head makes it the
    // slowest (the formula assumes equal stages) and each hand-over takes its transfer time.
    EXPECT_GT(mean, formula - 0.02) << "tp " << tp;
    EXPECT_LT(mean, formula + 0.15) << "tp " << tp;
  }
  // Splitting each stage over a tensor group adds its collectives inside every pass, which the
  // stage waits on beside its peers: its share of idle time between stages hardly moves.
  for (int r = 0; r < 4; ++r) EXPECT_NEAR(bubble[1][r], bubble[0][r], 0.05) << "rank " << r;
}

}  // namespace
}  // namespace shardscope::analysis
