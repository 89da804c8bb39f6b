// Two streams sharing one GPU (app/analysis/shared_gpu_streams): against the pair the GPU's
// profile measured (the longer and (1 - h) of the shorter), and the closed forms of its limits.
#include "app/analysis/shared_gpu_streams.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "app/analysis/configuration_projection.h"
#include "app/analysis/data_parallel_step.h"
#include "engine/train/config.h"
#include "profiling/projection/hardware_profile.h"

namespace shardscope::analysis {
namespace {

using K = StreamInterval;

// A GEMM and a collective started together take the longer plus (1 - h) of the shorter, which
// is how the share was measured (scripts/gpu-sm-contention.py), whichever is the longer.
TEST(SharedGpuStreams, APairStartedTogetherTakesTheLongerAndWhatItDidNotHideOfTheShorter) {
  const double h100 = profiling::load_hardware_profile("8xH100").gpu.collective_hidden_beside_gemm;
  ASSERT_GT(h100, 0.0);
  for (const double h : {0.0, 0.41, h100, 1.0}) {
    for (const auto& [gemm, collective] : {std::pair{3e-3, 1e-3}, std::pair{1e-3, 3e-3}}) {
      SharedGpuStreams s;
      s.collective(collective, K::kGather);
      s.compute(gemm, K::kForward);
      StreamTimeline t;
      const auto r = s.run({h, 1}, &t);
      const double longer = std::max(gemm, collective), shorter = std::min(gemm, collective);
      EXPECT_NEAR(std::max(r.compute_end, r.comm_end), longer + (1 - h) * shorter, 1e-15)
          << "h " << h << ", GEMM " << gemm;
      EXPECT_DOUBLE_EQ(r.compute_alone_s, gemm);
      // Each runs at 1 / (2 - h) while the other does: the shorter ends at (2 - h) times its own.
      EXPECT_NEAR(std::min(r.compute_end, r.comm_end), (2 - h) * shorter, 1e-15) << h;
      ASSERT_EQ(t.compute.size(), 1u);
      EXPECT_DOUBLE_EQ(t.compute[0].alone_s, gemm);
      EXPECT_NEAR(t.compute[0].end, r.compute_end, 1e-15);
    }
  }
}

// Compute bound by its host's dispatch leaves the GPU idle between its kernels: they contend with
// a collective only while they run. Its kernels, slowed to 1 / (2 - h), keep the host's pace while
// they still fit in its time; the collective is slowed in proportion to the kernels' share.
TEST(SharedGpuStreams, ComputeBoundByItsHostContendsOnlyWhileItsKernelsRun) {
  const double h = 0.47, shared = 1 / (2 - h);
  const double gemm = 3e-3, collective = 1e-3;
  for (const double busy : {0.25, 0.5, shared, 0.8, 1.0}) {
    SharedGpuStreams s;
    s.collective(collective, K::kGather);
    s.compute(gemm, K::kForward);
    const auto r = s.run({h, busy});
    const double compute_rate = std::min(1.0, shared / busy), comm_rate = 1 - busy * (1 - shared);
    EXPECT_NEAR(r.comm_end, collective / comm_rate, 1e-15) << busy;
    EXPECT_NEAR(r.compute_end, r.comm_end + gemm - compute_rate * r.comm_end, 1e-15) << busy;
    // Kernels that fit in the host's time even slowed: the compute keeps its pace.
    if (busy <= shared) {
      EXPECT_NEAR(r.compute_end, gemm, 1e-15) << busy;
    }
    if (busy == 1.0) {
      EXPECT_NEAR(r.compute_end, gemm + (1 - h) * collective, 1e-15);
    }
  }
}

// A compute task waits for the collective it needs; a collective runs after the one issued before
// it, from when a compute task issues it; neither slows a stream that is idle.
TEST(SharedGpuStreams, WaitsAndIssuesInOrder) {
  SharedGpuStreams s;
  const int gather = s.collective(2e-3, K::kGather);
  const int first = s.compute(1e-3, K::kForward);           // beside the gather: slowed
  const int second = s.compute(1e-3, K::kForward, gather);  // waits for it
  s.collective(1e-3, K::kReduce, second, true);             // after it, alone
  EXPECT_EQ(first, 0);
  StreamTimeline t;
  const auto r = s.run({0.5, 1}, &t);
  // Both at 1 / 1.5 until the first compute ends (1.5 ms; 1 ms of the gather done); the gather's
  // last 1 ms alone (2.5 ms); the second compute alone (3.5 ms); its reduce alone (4.5 ms).
  EXPECT_NEAR(r.compute_end, 3.5e-3, 1e-15);
  EXPECT_NEAR(r.comm_end, 4.5e-3, 1e-15);
  ASSERT_EQ(t.compute.size(), 2u);
  EXPECT_NEAR(t.compute[0].end, 1.5e-3, 1e-15);
  EXPECT_NEAR(t.compute[1].start, 2.5e-3, 1e-15);
  EXPECT_THROW(s.collective(1e-3, K::kReduce, 7), std::logic_error);
  // A collective that moves nothing is no task, and nothing waits for it.
  EXPECT_EQ(s.collective(0, K::kGather, second), -1);
}

// ZeRO-3 with prefetch on a GPU whose two streams hide nothing of each other (h 0) takes its
// compute and its collectives one after another, as without prefetch; as h grows the pass only
// gets shorter, and never longer than without prefetch.
TEST(SharedGpuStreams, AShareOfNothingSerialisesAndMoreHiddenIsNeverSlower) {
  const std::vector<UnitWork> u(8, UnitWork{3e-3, 6e-3, 2e-3, 2e-3, 4e-3});
  double compute = 0, comm = 0;
  for (const auto& w : u)
    compute += w.forward_s + w.backward_s, comm += 2 * w.gather_s + w.reduce_s;
  EXPECT_NEAR(sharded_unit_pass(u, true, nullptr, {0, 1}).span_s, compute + comm, 1e-12);
  double previous = compute + comm;
  for (const double h : {0.25, 0.47, 0.75, 1.0}) {
    const UnitPassTime t = sharded_unit_pass(u, true, nullptr, {h, 1});
    EXPECT_LT(t.span_s, previous) << h;
    EXPECT_LE(t.span_s, sharded_unit_pass(u, false, nullptr, {h, 1}).span_s + 1e-12) << h;
    EXPECT_DOUBLE_EQ(t.compute_s, compute);
    previous = t.span_s;
  }
}

// DDP's buckets beside backward: the first bucket (1 ms) goes when the last unit's backward (2 ms)
// is done and runs beside the first unit's (2 ms): the pair takes 2 + (1 - h) ms, the bucket ending
// at (2 - h) ms into it; the last bucket then runs alone. The tail past 4 ms of backward alone:
// 2 - h (1 ms with h 1, the streams of data_parallel_step_test).
TEST(SharedGpuStreams, ABucketBesideBackwardSlowsItAsThePairWasMeasured) {
  const std::vector<GradientUnit> g(2, GradientUnit{2e-3, {1e6}});
  const auto collective = [](double bytes) { return bytes * 1e-9; };  // 1 ms a MB
  const auto buckets = plan_gradient_buckets(g, 1e6, 1e6);
  ASSERT_EQ(buckets.size(), 2u);
  for (const double h : {0.0, 0.47, 1.0}) {
    std::vector<StreamInterval> comm;
    EXPECT_NEAR(gradient_sync_tail(g, buckets, true, collective, 0, &comm, {h, 1}), (2 - h) * 1e-3,
                1e-15)
        << h;
    ASSERT_FALSE(comm.empty());
    EXPECT_NEAR(comm.back().end, (6 - h) * 1e-3, 1e-15) << h;
  }
  // Without overlap nothing runs beside backward, whatever the share.
  EXPECT_NEAR(gradient_sync_tail(g, buckets, false, collective, 0, nullptr, {0.47, 1}), 2e-3,
              1e-15);
}

// A projected data-parallel step applies the share where it was measured: a GPU that measured it
// (the H100), for a group within one node. Across nodes the collectives run at the network's pace,
// which no measurement covers, and an A100 measured nothing: there neither stream slows the other.
TEST(SharedGpuStreams, AProjectionSlowsTheComputeBesideCollectivesWhereTheGpuMeasuredIt) {
  const auto project = [](const std::string& strategy, int world, const std::string& hardware) {
    const Config c =
        config_from_json(nlohmann::json{{"strategy", strategy},
                                        {"world", world},
                                        {"preset", "gpt2-small"},
                                        {"global_batch", 8 * world},
                                        {"grad_accum", 2},
                                        {"strategy_options", {{"precision", "bf16"}}}});
    return project_configuration(c, profiling::load_hardware_profile(hardware), world / 8);
  };
  for (const char* strategy : {"ddp_bucketed", "fsdp"}) {
    const ConfigurationProjection h100 = project(strategy, 8, "8xH100");
    EXPECT_NE(h100.data_comm_what.find("slowed"), std::string::npos) << strategy;
    EXPECT_EQ(project(strategy, 8, "8xA100").data_comm_what.find("slowed"), std::string::npos)
        << strategy;
    EXPECT_EQ(project(strategy, 16, "2x8xH100-IB").data_comm_what.find("slowed"), std::string::npos)
        << strategy;
  }
}

}  // namespace
}  // namespace shardscope::analysis
