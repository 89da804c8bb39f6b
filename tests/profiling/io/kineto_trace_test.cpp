#include "profiling/io/kineto_trace.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "profiling/metrics/trace_metrics.h"
#include "profiling/record/device_tracer.h"
#include "profiling/trace/device_work.h"

namespace shardscope::profiling {
namespace {

Event event(Trace& t, const std::string& name, Category c, int64_t t0, int64_t t1, int step,
            uint8_t lane = kHostLane, int64_t seq = -1) {
  Event e;
  e.name = t.intern(name);
  e.group = t.intern("default");
  e.category = c;
  e.t0_ns = t0;
  e.t1_ns = t1;
  e.step = step;
  e.lane = lane;
  e.seq = seq;
  return e;
}

// A CPU rank: steps 0 (warm-up) and 1; in step 1 two spans of compute and two all-reduces in
// flight together. Times in microseconds x 1000.
Trace cpu_trace() {
  Trace t;
  t.run = run_record_from_json(R"({"world": 2, "backend": "gloo"})");
  for (int rank : {0, 1}) {
    RankTrace r;
    r.rank = rank;
    r.lanes = {"host", "comm"};
    r.events.push_back(event(t, "step 0", Category::kStep, 0, 100000, 0));
    r.events.push_back(event(t, "forward", Category::kForward, 10000, 50000, 0));
    r.events.push_back(event(t, "step 1", Category::kStep, 100000, 200000, 1));
    r.events.push_back(event(t, "forward", Category::kForward, 100000, 140000, 1));
    r.events.push_back(event(t, "backward", Category::kBackward, 140000, 180000, 1));
    r.events.push_back(event(t, "optimizer", Category::kOptimizer, 185000, 200000, 1));
    r.events.push_back(
        event(t, "all_reduce", Category::kCollective, 150000, 170000, 1, kCommLane, 0));
    r.events.push_back(
        event(t, "all_reduce", Category::kCollective, 160000, 190000, 1, kCommLane, 1));
    t.ranks.push_back(r);
  }
  t.normalise();
  return t;
}

TEST(DeviceWork, OnTheCpuSpansAreComputeAndConcurrentCollectivesGetStreamsOfTheirOwn) {
  const Trace t = cpu_trace();
  EXPECT_EQ(measured_steps(t, t.ranks[0]), std::vector<int>({1}));
  const auto work = device_work(t, t.ranks[0]);
  ASSERT_EQ(work.size(), 4u);  // step 0 is warm-up, the optimizer is neither
  std::set<int64_t> correlations;
  std::map<WorkKind, std::set<int>> streams;
  for (const auto& w : work) {
    EXPECT_EQ(w.step, 1);
    EXPECT_EQ(w.launch, nullptr);
    correlations.insert(w.correlation);
    streams[w.kind].insert(w.stream);
  }
  EXPECT_EQ(correlations.size(), 4u);
  // forward then backward: one stream; the two all-reduces overlap: two.
  EXPECT_EQ(streams[WorkKind::kCompute], std::set<int>({kFirstComputeStream}));
  EXPECT_EQ(streams[WorkKind::kCommunication],
            std::set<int>({kFirstCommStream, kFirstCommStream + 1}));
}

TEST(WindowMetrics, HtaFiguresOfAHandBuiltStep) {
  const auto m = window_metrics(cpu_trace());
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].first_step, 1);
  EXPECT_EQ(m[0].last_step, 1);
  EXPECT_EQ(m[0].kernel_span_ns, 90000);  // [100, 190) us
  EXPECT_EQ(m[0].compute_ns, 80000);      // [100, 180)
  EXPECT_EQ(m[0].comm_ns, 40000);         // [150, 190)
  EXPECT_EQ(m[0].overlap_ns, 30000);      // [150, 180)
  EXPECT_EQ(m[0].idle_ns(), 0);
  EXPECT_EQ(m[0].non_compute_ns(), 10000);  // [180, 190)
}

TEST(KinetoTrace, HeaderNamesTheRankTheWayHtaFindsItAndKernelsLinkToLaunches) {
  const Trace t = cpu_trace();
  const std::string text = to_kineto_json(t, t.ranks[1]);
  // HTA's own expression, on the first line that matches.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex(R"RE("rank":\s+(\d+))RE")));
  EXPECT_EQ(m[1], "1");
  const auto doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["schemaVersion"], 1);
  EXPECT_EQ(doc["distributedInfo"]["world_size"], 2);
  std::map<int64_t, std::string> launches;
  std::vector<nlohmann::json> kernels;
  std::set<std::string> steps;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string name = e["name"];
    if (name.rfind("ProfilerStep#", 0) == 0) steps.insert(name);
    if (e["cat"] == "cuda_runtime") launches[e["args"]["correlation"]] = name;
    if (e["cat"] == "kernel") kernels.push_back(e);
  }
  EXPECT_EQ(steps, std::set<std::string>({"ProfilerStep#1"}));
  ASSERT_EQ(kernels.size(), 4u);
  int nccl = 0;
  for (const auto& k : kernels) {
    EXPECT_EQ(launches.count(k["args"]["correlation"].get<int64_t>()), 1u) << k.dump();
    EXPECT_TRUE(k["args"].contains("stream"));
    if (k["name"] == "ncclDevKernel_AllReduce") ++nccl;
  }
  EXPECT_EQ(nccl, 2);
  // Whole microseconds from the trace's first event: step 1's forward starts at 100.
  EXPECT_EQ(kernels.front()["ts"], 100);
  EXPECT_EQ(kernels.front()["dur"], 40);
}

// A GPU rank: CUPTI kernels with the runtime calls that launched them. The host spans and the
// host's view of the collective give way to the device's own kernels.
TEST(DeviceWork, OnAGpuRecordedKernelsKeepStreamCorrelationAndLaunch) {
  Trace t;
  RankTrace r;
  r.lanes = {"host", "comm", "stream 7", kCudaRuntimeLane, "stream 13"};
  r.events.push_back(event(t, "step 0", Category::kStep, 0, 100, 0));
  r.events.push_back(event(t, "step 1", Category::kStep, 100, 200, 1));
  r.events.push_back(event(t, "forward", Category::kForward, 110, 150, 1));
  r.events.push_back(event(t, "all_reduce", Category::kCollective, 150, 190, 1, kCommLane, 0));
  r.events.push_back(event(t, "cudaLaunchKernel", Category::kOther, 10, 11, -1, 3, 2));
  r.events.push_back(event(t, "gemm", Category::kKernel, 20, 30, -1, 2, 2));  // warm-up step
  r.events.push_back(event(t, "cudaLaunchKernel", Category::kOther, 112, 113, -1, 3, 5));
  r.events.push_back(event(t, "gemm", Category::kKernel, 120, 140, -1, 2, 5));
  r.events.push_back(event(t, "cudaLaunchKernel", Category::kOther, 151, 152, -1, 3, 6));
  r.events.push_back(
      event(t, "ncclDevKernel_AllReduce_Sum_f32", Category::kKernel, 130, 180, -1, 4, 6));
  t.ranks.push_back(r);
  t.normalise();
  const auto work = device_work(t, t.ranks[0]);
  ASSERT_EQ(work.size(), 2u);
  EXPECT_EQ(work[0].kind, WorkKind::kCompute);
  EXPECT_EQ(work[0].stream, 7);
  EXPECT_EQ(work[0].correlation, 5);
  ASSERT_NE(work[0].launch, nullptr);
  EXPECT_EQ(work[0].launch_ns(), 112);
  EXPECT_EQ(work[0].step, 1);
  EXPECT_EQ(work[1].kind, WorkKind::kCommunication);
  EXPECT_EQ(work[1].stream, 13);
  EXPECT_EQ(work[1].correlation, 6);

  const auto m = window_metrics(t);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].kernel_span_ns, 60);  // [120, 180)
  EXPECT_EQ(m[0].overlap_ns, 10);      // [130, 140)
  EXPECT_EQ(m[0].comm_ns, 50);
  EXPECT_EQ(m[0].idle_ns(), 0);
  EXPECT_EQ(m[0].non_compute_ns(), 40);
}

}  // namespace
}  // namespace shardscope::profiling
