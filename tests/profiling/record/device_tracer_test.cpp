#include "profiling/record/device_tracer.h"

#include <gtest/gtest.h>

#include <torch/cuda.h>

namespace shardscope::profiling {
namespace {

// On a machine without a GPU (or a build without CUPTI), enabling says why and nothing breaks.
TEST(DeviceTracer, WithoutAGpuEnablingFailsWithAReason) {
  if (torch::cuda::is_available() && DeviceTracer::built_with_cupti()) {
    GTEST_SKIP() << "a GPU is present: the fallback path cannot be exercised here";
  }
  std::string why;
  EXPECT_FALSE(DeviceTracer::instance().enable(&why));
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(DeviceTracer::instance().enabled());
  DeviceTracer::instance().push_rank(3);  // harmless no-ops
  DeviceTracer::instance().pop_rank();
  EXPECT_TRUE(DeviceTracer::instance().collect().empty());
}

TEST(DeviceTracer, ActivityLandsOnItsRanksStreamLanes) {
  Trace t;
  for (int r = 0; r < 2; ++r) {
    RankTrace rank;
    rank.rank = r;
    rank.lanes = {"host", "comm"};
    t.ranks.push_back(rank);
  }
  add_device_activity(t, {{1, "gemm", Category::kKernel, 7, 100, 200, 0},
                          {1, "memcpy", Category::kMemcpy, 7, 210, 260, 4096},
                          {0, "ncclKernel_AllReduce", Category::kKernel, 13, 50, 90, 0},
                          {-1, "unattributed", Category::kKernel, 1, 0, 1, 0}});
  ASSERT_EQ(t.ranks[1].lanes.size(), 3u);
  EXPECT_EQ(t.ranks[1].lanes[2], "stream 7");
  EXPECT_EQ(t.ranks[1].events.size(), 2u);
  EXPECT_EQ(t.ranks[0].lanes[2], "stream 13");
  EXPECT_EQ(t.str(t.ranks[0].events[0].name), "ncclKernel_AllReduce");
  EXPECT_EQ(t.ranks[1].events[1].bytes, 4096);
}

TEST(DeviceTracer, LaunchesGetALaneOfTheirOwnAndEveryEventKeepsItsCorrelationId) {
  Trace t;
  RankTrace rank;
  rank.lanes = {"host", "comm"};
  t.ranks.push_back(rank);
  add_device_activity(t, {{0, "cudaLaunchKernel", Category::kOther, 0, 90, 95, 0, 41},
                          {0, "gemm", Category::kKernel, 7, 100, 200, 0, 41}});
  ASSERT_EQ(t.ranks[0].lanes.size(), 4u);
  EXPECT_EQ(t.ranks[0].lanes[2], kCudaRuntimeLane);
  EXPECT_EQ(t.ranks[0].lanes[3], "stream 7");
  ASSERT_EQ(t.ranks[0].events.size(), 2u);
  for (const auto& e : t.ranks[0].events) EXPECT_EQ(e.seq, 41);
}

// Our CUPTI recording names a copy as the PyTorch profiler does, from CUPTI's kinds (copy kind;
// memory at the source and at the destination): the names in assets/traces/kineto/gpu-*, which
// KinetoReader.ACopyKeepsItsKindAndItsBytes reads. Before, every copy was "memcpy", and a
// pageable copy stalling a step looked like any other.
TEST(DeviceTracer, ACopyIsNamedByItsKindAsThePyTorchProfilerNamesIt) {
  EXPECT_EQ(memcpy_name(8, 3, 3), "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(memcpy_name(2, 3, 1), "Memcpy DtoH (Device -> Pageable)");
  EXPECT_EQ(memcpy_name(1, 2, 3), "Memcpy HtoD (Pinned -> Device)");
  EXPECT_EQ(memcpy_name(10, 6, 7), "Memcpy PtoP (Device Static -> Managed Static)");
  EXPECT_EQ(memcpy_name(11, -1, 8), "Memcpy Unknown (Unknown -> Unknown)");
}

}  // namespace
}  // namespace shardscope::profiling
