// Two streams sharing one GPU (app/analysis/shared_gpu_streams): against the pairs the GPU's
// profile measured, and the closed forms of its limits.
#include "app/analysis/shared_gpu_streams.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "app/analysis/configuration_projection.h"
#include "app/analysis/data_parallel_step.h"
#include "engine/train/config.h"
#include "profiling/projection/hardware_profile.h"

namespace shardscope::analysis {
namespace {

using K = StreamInterval;

// A rate pair from a share h alone (a profile without the measured rates): both streams at
// 1 / (2 - h). A GEMM and a collective started together then take the longer plus (1 - h) of the
// shorter, which is how the share was measured (scripts/gpu-sm-contention.py), whichever is the
// longer.
GpuSharing from_share(double h) {
  const double rate = 1 / (2 - h);
  return {rate, rate};
}

TEST(SharedGpuStreams, APairStartedTogetherTakesTheLongerAndWhatItDidNotHideOfTheShorter) {
  const double h100 = profiling::load_hardware_profile("8xH100").gpu.collective_hidden_beside_gemm;
  ASSERT_GT(h100, 0.0);
  for (const double h : {0.0, 0.41, h100, 1.0}) {
    for (const auto& [gemm, collective] : {std::pair{3e-3, 1e-3}, std::pair{1e-3, 3e-3}}) {
      SharedGpuStreams s;
      s.collective(collective, K::kGather);
      s.compute(gemm, K::kForward);
      StreamTimeline t;
      const auto r = s.run(from_share(h), &t);
      const double longer = std::max(gemm, collective), shorter = std::min(gemm, collective);
      EXPECT_NEAR(std::max(r.compute_end, r.comm_end), longer + (1 - h) * shorter, 1e-14)
          << "h " << h << ", GEMM " << gemm;
      EXPECT_DOUBLE_EQ(r.compute_alone_s, gemm);
      // Each runs at 1 / (2 - h) while the other does: the shorter ends at (2 - h) times its own.
      EXPECT_NEAR(std::min(r.compute_end, r.comm_end), (2 - h) * shorter, 1e-14) << h;
      ASSERT_EQ(t.compute.size(), 1u);
      EXPECT_DOUBLE_EQ(t.compute[0].alone_s, gemm);
      EXPECT_NEAR(t.compute[0].end, r.compute_end, 1e-15);
      EXPECT_NEAR(slowed_seconds(t.compute), r.compute_end - gemm, 1e-15);
    }
  }
}

// With the H100's measured paces (its GEMMs at 0.81 beside the collective, the collective at 0.56
// beside them), a collective shorter than the compute costs the compute what it lost while the
// collective ran: the collective ends at s / 0.56, and the compute has done 0.81 of that.
TEST(SharedGpuStreams, EachStreamRunsAtItsOwnMeasuredPaceWhileTheOtherRuns) {
  const profiling::GpuCompute gpu = profiling::load_hardware_profile("8xH100").gpu;
  const double rc = gpu.gemm_rate_beside_collective, rm = gpu.collective_rate_beside_gemm;
  ASSERT_GT(rc, rm);  // the GEMMs were slowed less than the copy beside them
  const double compute = 3e-3, collective = 1e-3;
  SharedGpuStreams s;
  s.collective(collective, K::kGather);
  s.compute(compute, K::kForward);
  const auto r = s.run({rc, rm});
  EXPECT_NEAR(r.comm_end, collective / rm, 1e-15);
  EXPECT_NEAR(r.compute_end, compute + (1 - rc) * collective / rm, 1e-15);
  // The symmetric pair from the share alone would charge the compute (1 - h) of the collective.
  const double h = gpu.collective_hidden_beside_gemm;
  EXPECT_LT(r.compute_end - compute, (1 - h) * collective);
}

// sequence parallelism prices a gather beside its GEMM with pair_seconds (profiling, which
// app/analysis may not be below): the same pair as the streams run it, whichever ends first; and
// with nothing beside it, one after the other.
TEST(SharedGpuStreams, SequenceParallelismsPairTakesWhatTheStreamsDo) {
  for (const auto& name : {"8xH100", "8xH200"}) {
    const profiling::GpuCompute::Contention c =
        profiling::load_hardware_profile(name).gpu.contention();
    ASSERT_TRUE(c.measured) << name;
    for (const auto& [compute, collective] :
         {std::pair{3e-3, 1e-3}, std::pair{1e-3, 3e-3}, std::pair{2e-3, 2e-3}}) {
      SharedGpuStreams s;
      s.collective(collective, K::kGather);
      s.compute(compute, K::kBackward);
      const auto r = s.run({c.compute_rate, c.collective_rate});
      EXPECT_NEAR(profiling::pair_seconds(compute, collective, c),
                  std::max(r.compute_end, r.comm_end), 1e-15)
          << name << " " << compute << " beside " << collective;
    }
    EXPECT_DOUBLE_EQ(profiling::pair_seconds(0, 2e-3, c), 2e-3);
    EXPECT_DOUBLE_EQ(profiling::pair_seconds(3e-3, 0, c), 3e-3);
    EXPECT_DOUBLE_EQ(profiling::pair_seconds(3e-3, 2e-3, {}), 3e-3);  // neither slows the other
  }
}

// Compute bound by its host's dispatch leaves the GPU idle between its kernels: they contend with
// a collective only while they run. Its kernels, slowed to the measured pace, keep the host's pace
// while they still fit in its time; the collective is slowed only over the time they fill.
TEST(SharedGpuStreams, ComputeBoundByItsHostContendsOnlyWhileItsKernelsRun) {
  const double rc = 0.8, rm = 0.5;
  const double gemm = 3e-3, collective = 1e-3;
  double previous_comm = 0, previous_compute = 0;
  for (const double busy : {0.25, 0.5, rc, 0.9, 1.0}) {
    SharedGpuStreams s;
    s.collective(collective, K::kGather);
    s.compute(gemm, K::kForward, -1, busy);
    const auto r = s.run({rc, rm});
    // Slowed kernels fill busy / rc of the time (all of it past rc): the collective runs at rm
    // over that share and at full pace over the rest.
    const double filled = std::min(1.0, busy / rc);
    EXPECT_NEAR(r.comm_end, collective / (filled * rm + (1 - filled)), 1e-15) << busy;
    if (busy <= rc) {
      EXPECT_NEAR(r.compute_end, gemm, 1e-15) << busy;  // the host's pace kept
    } else {
      // The kernels set the pace: busy / rc of the host's time for each second of it.
      EXPECT_NEAR(r.compute_end, r.comm_end + gemm - r.comm_end * rc / busy, 1e-15) << busy;
    }
    EXPECT_GE(r.comm_end, previous_comm) << busy;  // the same once kernels fill the time
    EXPECT_GE(r.compute_end, previous_compute) << busy;
    previous_comm = r.comm_end, previous_compute = r.compute_end;
  }
}

// Each compute task may say how much of its time its kernels fill (a small model's blocks bound
// by the host, its LM head by its kernels): a collective beside the host-bound one slows neither
// it nor, as much, the collective; beside the kernel-bound one both slow as measured.
TEST(SharedGpuStreams, EachComputeTaskContendsAsItsOwnKernelsFillTheGpu) {
  const double rc = 0.8, rm = 0.5, collective = 1e-3;
  // busy < 0: the task says nothing, and its kernels are taken to fill its time.
  const auto beside = [&](double busy) {
    SharedGpuStreams s;
    s.collective(collective, K::kGather);
    if (busy < 0) {
      s.compute(3e-3, K::kBackward);
    } else {
      s.compute(3e-3, K::kBackward, -1, busy);
    }
    return s.run({rc, rm});
  };
  const auto host_bound = beside(0.25), kernel_bound = beside(1.0), by_default = beside(-1);
  EXPECT_NEAR(host_bound.compute_end, 3e-3, 1e-15);
  EXPECT_LT(host_bound.comm_end, kernel_bound.comm_end);
  EXPECT_NEAR(kernel_bound.comm_end, collective / rm, 1e-15);
  EXPECT_NEAR(kernel_bound.compute_end, 3e-3 + (1 - rc) * collective / rm, 1e-15);
  EXPECT_DOUBLE_EQ(by_default.compute_end, kernel_bound.compute_end);
  // Kernels that fill none of the time (all host): neither slows the other.
  const auto all_host = beside(0);
  EXPECT_NEAR(all_host.compute_end, 3e-3, 1e-15);
  EXPECT_NEAR(all_host.comm_end, collective, 1e-12);
  SharedGpuStreams s;
  EXPECT_THROW(s.compute(1e-3, K::kBackward, -1, std::numeric_limits<double>::quiet_NaN()),
               std::logic_error);
}

// A compute task waits for the collective it needs; a collective runs after the one issued before
// it, from when a compute task issues it; neither slows a stream that is idle.
TEST(SharedGpuStreams, WaitsAndIssuesInOrder) {
  SharedGpuStreams s;
  const int gather = s.collective(2e-3, K::kGather);
  s.compute(1e-3, K::kForward);                             // beside the gather: slowed
  const int second = s.compute(1e-3, K::kForward, gather);  // waits for it
  s.collective(1e-3, K::kReduce, second, true);             // after it, alone
  StreamTimeline t;
  const auto r = s.run(from_share(0.5), &t);
  // Both at 1 / 1.5 until the first compute ends (1.5 ms; 1 ms of the gather done); the gather's
  // last 1 ms alone (2.5 ms); the second compute alone (3.5 ms); its reduce alone (4.5 ms).
  EXPECT_NEAR(r.compute_end, 3.5e-3, 1e-15);
  EXPECT_NEAR(r.comm_end, 4.5e-3, 1e-15);
  ASSERT_EQ(t.compute.size(), 2u);
  EXPECT_NEAR(t.compute[0].end, 1.5e-3, 1e-15);
  EXPECT_NEAR(t.compute[1].start, 2.5e-3, 1e-15);
  // A collective that moves nothing is no task, and nothing waits for it.
  EXPECT_EQ(s.collective(0, K::kGather, second), -1);
}

// A point of no work where the compute waits for a collective (ZeRO-2's buckets in flight) holds
// the compute until it is done. Tasks that could never run, or never end, are refused as they
// are added: nothing waits forever.
TEST(SharedGpuStreams, AWaitHoldsTheComputeAndImpossibleTasksAreRefused) {
  SharedGpuStreams s;
  const int bucket = s.collective(2e-3, K::kReduce);
  s.compute(0, K::kBackward, bucket);
  s.compute(1e-3, K::kBackward);
  StreamTimeline t;
  const auto r = s.run({1, 1}, &t);
  EXPECT_NEAR(r.compute_end, 3e-3, 1e-15);
  ASSERT_EQ(t.compute.size(), 1u);
  EXPECT_NEAR(t.compute[0].start, 2e-3, 1e-15);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THROW(s.collective(1e-3, K::kReduce, 7), std::logic_error);         // no task 7
  EXPECT_THROW(s.collective(1e-3, K::kReduce, -1, true), std::logic_error);  // ends of nothing
  EXPECT_THROW(s.compute(1e-3, K::kForward, 5), std::logic_error);           // no collective 5
  for (const double bad : {nan, inf}) {
    EXPECT_THROW(s.compute(bad, K::kForward), std::logic_error) << bad;
    EXPECT_THROW(s.collective(bad, K::kGather), std::logic_error) << bad;
  }
  // Paces that are not numbers run as if neither stream slowed the other.
  SharedGpuStreams pair;
  pair.collective(1e-3, K::kGather);
  pair.compute(3e-3, K::kForward);
  const auto odd = pair.run({nan, nan});
  EXPECT_NEAR(std::max(odd.compute_end, odd.comm_end), 3e-3, 1e-15);
}

// ZeRO-3 with prefetch on a GPU whose two streams hide nothing of each other (h 0) takes its
// compute and its collectives one after another, as without prefetch; as h grows the pass only
// gets shorter, and never longer than without prefetch.
TEST(SharedGpuStreams, AShareOfNothingSerialisesAndMoreHiddenIsNeverSlower) {
  const std::vector<UnitWork> u(8, UnitWork{3e-3, 6e-3, 2e-3, 2e-3, 4e-3});
  double compute = 0, comm = 0;
  for (const auto& w : u)
    compute += w.forward_s + w.backward_s, comm += 2 * w.gather_s + w.reduce_s;
  EXPECT_NEAR(sharded_unit_pass(u, true, nullptr, from_share(0)).span_s, compute + comm, 1e-12);
  double previous = compute + comm;
  for (const double h : {0.25, 0.47, 0.75, 1.0}) {
    const UnitPassTime t = sharded_unit_pass(u, true, nullptr, from_share(h));
    EXPECT_LT(t.span_s, previous) << h;
    EXPECT_LE(t.span_s, sharded_unit_pass(u, false, nullptr, from_share(h)).span_s + 1e-12) << h;
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
    StreamTimeline streams;
    EXPECT_NEAR(gradient_sync_tail(g, buckets, true, collective, 0, &streams, from_share(h)),
                (2 - h) * 1e-3, 1e-15)
        << h;
    const auto& comm = streams.comm;
    ASSERT_FALSE(comm.empty());
    EXPECT_NEAR(comm.back().end, (6 - h) * 1e-3, 1e-15) << h;
  }
  // Without overlap nothing runs beside backward, whatever the share.
  EXPECT_NEAR(gradient_sync_tail(g, buckets, false, collective, 0, nullptr, from_share(0.47)), 2e-3,
              1e-15);
}

// A projected data-parallel step shares the GPU as it was measured: on a GPU that measured it (the
// H100), for a group within one node. Across nodes the collectives run at the network's pace,
// which no measurement covers, and an A100 measured nothing: there neither stream slows the other.
TEST(SharedGpuStreams, AProjectionSlowsTheComputeBesideCollectivesWhereTheGpuMeasuredIt) {
  const auto project = [](const std::string& strategy, int world, const std::string& hardware) {
    const Config c =
        config_from_json(nlohmann::json{{"strategy", strategy},
                                        {"world", world},
                                        {"preset", "gpt2-small"},
                                        {"global_batch", 64 * world},
                                        {"grad_accum", 2},
                                        {"strategy_options", {{"precision", "bf16"}}}});
    return project_configuration(c, profiling::load_hardware_profile(hardware), world / 8);
  };
  for (const char* strategy : {"ddp_bucketed", "fsdp"}) {
    const ConfigurationProjection h100 = project(strategy, 8, "8xH100");
    EXPECT_NE(h100.data_comm_what.find("sharing the GPU"), std::string::npos) << strategy;
    EXPECT_GT(h100.data_comm_slowed_s, 0.0) << strategy;
    for (const auto& unshared :
         {project(strategy, 8, "8xA100"), project(strategy, 16, "2x8xH100-IB")}) {
      EXPECT_EQ(unshared.data_comm_what.find("sharing the GPU"), std::string::npos) << strategy;
      EXPECT_EQ(unshared.data_comm_slowed_s, 0.0) << strategy;
    }
  }
}

// Overlap is never slower, on GPUs whose streams slow each other too: while both run, the two
// measured paces add to more than one stream's (H100 0.81 + 0.56, H200 0.82 + 0.51), so running a
// collective beside the compute always beats running it after. DDP's buckets during backward
// against after it, FSDP's prefetched gathers against gathers on demand.
TEST(SharedGpuStreams, OverlapIsNeverSlowerOnAGpuWhoseStreamsSlowEachOther) {
  for (const char* hardware : {"8xH100", "8xH200"}) {
    const profiling::HardwareProfile hw = profiling::load_hardware_profile(hardware);
    const auto c = hw.gpu.contention();
    EXPECT_GT(c.compute_rate + c.collective_rate, 1.0) << hardware;
    for (const auto& [strategy, option] :
         {std::pair{"ddp_bucketed", "overlap"}, {"fsdp", "prefetch"}}) {
      for (const char* preset : {"gpt2-small", "gpt-7b"}) {
        const auto step = [&](bool on) {
          const Config config = config_from_json(
              nlohmann::json{{"strategy", strategy},
                             {"world", 8},
                             {"preset", preset},
                             {"global_batch", 64},
                             {"strategy_options", {{"precision", "bf16"}, {option, on}}}});
          return project_configuration(config, hw, 1, false);
        };
        const ConfigurationProjection with = step(true), without = step(false);
        EXPECT_LE(with.step_s, without.step_s) << hardware << " " << strategy << " " << preset;
        // 7B's kernels fill the GPU, so the collectives beside them slow them.
        if (std::string(preset) == "gpt-7b") {
          EXPECT_GT(with.data_comm_slowed_s, 0.0) << hardware << " " << strategy;
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardscope::analysis
