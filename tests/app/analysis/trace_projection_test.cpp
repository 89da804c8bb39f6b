// Replaying a recorded run onto GPUs (issue 34 §1): a CPU recording's compute becomes what our
// per-kernel model says that very configuration costs on the target's GPU, not the recording
// times one ratio of matmul rates (which made a small GPT on 8xH100 all communication, 0.06 ms
// a step against 21 ms measured on an H100); a GPU recording keeps the ratio.
#include "app/analysis/trace_projection.h"

#include <gtest/gtest.h>

#include "app/analysis/configuration_projection.h"
#include "engine/state/recorded_config.h"
#include "profiling/io/trace_io.h"

namespace shardscope::analysis {
namespace {

profiling::Trace asset(const std::string& name) {
  return profiling::read_trace_file(std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/" + name);
}

TEST(TraceProjection, ACpuRecordingsComputeIsOurModelOfItOnTheTargetGpu) {
  const profiling::Trace measured = asset("ddp_bucketed-w2.sst");
  const profiling::HardwareProfile hw = profiling::load_hardware_profile("8xH200");
  const TraceProjection t = project_recorded_trace(measured, hw, 0);
  EXPECT_TRUE(t.scale_from_model) << t.scale_source;
  Config config = *recorded_config(measured.run);
  config.strategy_options.precision = "bf16";
  const ConfigurationProjection model = project_configuration(config, hw, 1);
  const double per_rank = t.projected_summary.compute_s / double(measured.ranks.size());
  // The replay scales the recorded compute by one factor; the step's compute comes out as the
  // model's (the median step of the recording against the model's one step).
  EXPECT_NEAR(per_rank, model.compute_s + model.optimizer_s,
              0.05 * (model.compute_s + model.optimizer_s));
  // Not the matmul ratio's far-too-fast answer: a launch-bound GPT takes milliseconds.
  EXPECT_GT(t.projected_summary.step_s, 1e-3);
}

TEST(TraceProjection, AGpuRecordingKeepsTheRatioOfMatmulRates) {
  const profiling::Trace measured = asset("h100-ddp_bucketed-w4.sst");
  const TraceProjection t =
      project_recorded_trace(measured, profiling::load_hardware_profile("8xH100"), 0);
  EXPECT_FALSE(t.scale_from_model) << t.scale_source;
  EXPECT_NEAR(t.compute_scale, 1.0, 0.05);
}

}  // namespace
}  // namespace shardscope::analysis
