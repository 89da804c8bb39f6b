// A PyTorch profiler trace of someone's GPU job, replayed onto a GPU profile: its kernels are
// priced as the GPU it names (deviceProperties) measured them, never at this machine's CPU rate.
#include "app/analysis/trace_projection.h"

#include <gtest/gtest.h>

#include <string>

#include "app/analysis/trace_open.h"
#include "profiling/projection/hardware_profile.h"

namespace shardscope::analysis {
namespace {

const std::string kH200Trace =
    std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/kineto/gpu-ddp-nccl-w1";

TEST(TraceProjection, AForeignGpuTraceIsPricedAsTheGpuItNames) {
  const profiling::Trace measured = open_trace_path(kH200Trace);
  ASSERT_EQ(measured.run.device, "cuda");
  EXPECT_EQ(measured.run.device_name, "NVIDIA H200");
  const auto h200 = profiling::load_hardware_profile("8xH200");
  const auto h100 = profiling::load_hardware_profile("8xH100");
  // Onto its own GPU's profile, as recorded; onto an H100, by the two GPUs' measured rates.
  const TraceProjection same = project_recorded_trace(measured, h200, 0);
  EXPECT_DOUBLE_EQ(same.compute_scale, 1.0) << same.scale_source;
  const TraceProjection other = project_recorded_trace(measured, h100, 0);
  EXPECT_DOUBLE_EQ(other.compute_scale, h200.matmul_tflops / h100.matmul_tflops);
  EXPECT_NE(other.scale_source.find("NVIDIA H200"), std::string::npos) << other.scale_source;
  // Before, this machine's CPU rate made it 1e-4: a step of 11 ms projected to 0.00 ms.
  EXPECT_GT(other.projected_summary.step_s, 0.5 * other.measured_summary.step_s);
  // A GPU no profile describes (or none named): as recorded, and said so.
  profiling::Trace unnamed = measured;
  unnamed.run.device_name = "NVIDIA GeForce RTX 3060";
  const TraceProjection unknown = project_recorded_trace(unnamed, h100, 0);
  EXPECT_DOUBLE_EQ(unknown.compute_scale, 1.0);
  EXPECT_NE(unknown.scale_source.find("RTX 3060"), std::string::npos) << unknown.scale_source;
  EXPECT_EQ(profiling::profile_of_device("NVIDIA H100 80GB HBM3")->name, "8xH100");
  EXPECT_EQ(profiling::profile_of_device("NVIDIA A100-SXM4-80GB")->name, "8xA100");
  EXPECT_FALSE(profiling::profile_of_device(""));
}

}  // namespace
}  // namespace shardscope::analysis
