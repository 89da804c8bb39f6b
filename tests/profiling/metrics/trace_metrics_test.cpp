#include "profiling/metrics/trace_metrics.h"

#include <gtest/gtest.h>

#include "tests/support/sample_trace.h"

namespace shardscope::profiling {
namespace {

Event event(Trace& t, const char* name, Category c, int64_t t0, int64_t t1, uint8_t lane = 0) {
  Event e;
  e.name = t.intern(name);
  e.category = c;
  e.t0_ns = t0;
  e.t1_ns = t1;
  e.lane = lane;
  e.step = 0;
  return e;
}

TEST(StepMetrics, OverlapExposedAndIdleOnAHandBuiltStep) {
  Trace t;
  RankTrace r;
  r.lanes = {"host", "comm"};
  r.events.push_back(event(t, "step 0", Category::kStep, 0, 1000));
  r.events.push_back(event(t, "forward", Category::kForward, 0, 100));
  r.events.push_back(event(t, "backward", Category::kBackward, 100, 300));
  r.events.push_back(event(t, "all_reduce", Category::kCollective, 150, 400, kCommLane));
  r.events.push_back(event(t, "all_reduce", Category::kCollective, 350, 450, kCommLane));
  r.events.push_back(event(t, "optimizer", Category::kOptimizer, 600, 1000));
  t.ranks.push_back(r);
  auto m = step_metrics(t);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].span_ns, 1000);
  EXPECT_EQ(m[0].compute_ns, 300);       // [0, 300)
  EXPECT_EQ(m[0].comm_ns, 300);          // [150, 450)
  EXPECT_EQ(m[0].overlap_ns, 150);       // [150, 300)
  EXPECT_EQ(m[0].exposed_comm_ns, 150);  // [300, 450)
  EXPECT_EQ(m[0].idle_ns, 550);          // [450, 1000): optimizer is neither
  EXPECT_DOUBLE_EQ(m[0].overlap_fraction(), 0.5);
}

// A range the user measures: the same definitions, clipped to it. Forward [0, 1000) with a wait
// for the device [600, 700) inside it, a collective [500, 1500); the range [400, 1200).
TEST(RangeMetrics, ComputeCommAndExposedClippedToTheRange) {
  Trace t;
  RankTrace r;
  r.lanes = {"host", "comm"};
  r.events.push_back(event(t, "forward", Category::kForward, 0, 1000));
  r.events.push_back(event(t, "wait for the device", Category::kWait, 600, 700));
  r.events.push_back(event(t, "all_reduce", Category::kCollective, 500, 1500, kCommLane));
  t.ranks.push_back(r);
  const auto m = range_metrics(t, 1200, 400);  // either order
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].compute_ns, 500);       // [400, 600) and [700, 1000)
  EXPECT_EQ(m[0].comm_ns, 700);          // [500, 1200)
  EXPECT_EQ(m[0].exposed_comm_ns, 300);  // [600, 700) and [1000, 1200)
  const auto outside = range_metrics(t, 2000, 3000);
  EXPECT_EQ(outside[0].compute_ns + outside[0].comm_ns, 0);
}

// Two pipeline stages: stage 1 receives [0, 1100) what stage 0 sends [1000, 1100) after its
// forward [0, 1000). Stage 1's first 1000 ns waited for stage 0's pass: the bubble (which counts
// it), not communication that costs time, which the receive's last 100 ns are. So is stage 0's
// wait in the loss's gather over both stages for stage 1's pass. Counted as
// exposed communication, the same time once appeared twice, and a pipeline looked bound by its
// network. HTA's communication and overlap are unchanged.
TEST(StepMetrics, AReceiveWaitingForTheOtherStageIsNotExposedCommunication) {
  Trace t;
  t.run.world = 2;
  const auto p2p = [&](const char* op, int64_t t0, int64_t t1, int peer) {
    Event e = event(t, op, Category::kCollective, t0, t1, kCommLane);
    e.peer = int16_t(peer);
    e.seq = 0;
    e.group_size = 2;
    e.group = t.intern("world");
    return e;
  };
  RankTrace s0, s1;
  s0.rank = 0;
  s1.rank = 1;
  s0.lanes = s1.lanes = {"host", "comm"};
  // Then the step's loss, gathered over the world: stage 0 arrives at 1200, stage 1 at 2000.
  const auto gather = [&](int64_t t0) {
    Event e = event(t, "all_gather_into", Category::kCollective, t0, 2100, kCommLane);
    e.seq = 1;
    e.group_size = 2;
    e.group = t.intern("world");
    return e;
  };
  s0.events = {event(t, "forward", Category::kForward, 0, 1000), p2p("send", 1000, 1100, 1),
               gather(1200)};
  s1.events = {p2p("recv", 0, 1100, 0), event(t, "forward", Category::kForward, 1100, 2000),
               gather(2000)};
  t.ranks = {s0, s1};
  const auto m = step_metrics(t);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1].comm_ns, 1200);
  EXPECT_EQ(m[1].overlap_ns, 0);
  EXPECT_EQ(m[1].peer_wait_ns, 1000);    // [0, 1000): stage 0 still computing
  EXPECT_EQ(m[1].exposed_comm_ns, 200);  // [1000, 1100): the transfer; [2000, 2100) the gather
  EXPECT_EQ(m[0].peer_wait_ns, 800);     // [1200, 2000): the gather waits for stage 1
  EXPECT_EQ(m[0].exposed_comm_ns, 200);  // the send found its receive waiting; the gather's end
  // A range over the receive says the same; the timeline marks only the transfer as exposed.
  const auto range = range_metrics(t, 500, 1050);
  EXPECT_EQ(range[1].peer_wait_ns, 500);
  EXPECT_EQ(range[1].exposed_comm_ns, 50);
  EXPECT_EQ(peer_waits(t)[1], (Intervals{{0, 1000}}));
  EXPECT_EQ(peer_waits(t)[0], (Intervals{{1200, 2000}}));
}

TEST(StepMetrics, SampleTraceBothRanks) {
  auto m = step_metrics(test::sample_trace());
  ASSERT_EQ(m.size(), 2u);
  // Rank 0: compute [20, 5999), comm [3000, 7000) + [7100, 7300) + p2p [8000, 8500).
  EXPECT_EQ(m[0].compute_ns, 5979);
  EXPECT_EQ(m[0].comm_ns, 4000 + 200 + 500);
  EXPECT_EQ(m[0].overlap_ns, 2999);
}

TEST(CollectiveMetrics, BandwidthSkewAndTheLastRank) {
  auto all = collective_metrics(test::sample_trace());
  ASSERT_EQ(all.size(), 2u);  // all_reduce and all_gather; send/recv are not collectives
  const CollectiveMetrics& ar = all[0].op == "all_reduce" ? all[0] : all[1];
  const CollectiveMetrics& ag = all[0].op == "all_reduce" ? all[1] : all[0];
  EXPECT_EQ(ar.ranks, 2);
  EXPECT_EQ(ar.last_rank, 1);
  EXPECT_EQ(ar.skew_ns, 500 + 7);  // rank 1 issues 500 ns later, and its clock is offset by 7
  // From the last arrival (3507) to the last completion (7007): 3500 ns for 1 MB.
  EXPECT_EQ(ar.time_ns, 3500);
  EXPECT_NEAR(ar.algbw_gbps, 1e6 / 3500.0, 1e-9);
  EXPECT_NEAR(ar.busbw_gbps, ar.algbw_gbps * 1.0, 1e-9);  // 2(n-1)/n = 1 at n = 2
  EXPECT_EQ(ag.size_bytes, 2 * 4096);                     // every rank's contribution
  EXPECT_NEAR(ag.busbw_gbps, ag.algbw_gbps * 0.5, 1e-9);
}

TEST(CollectiveMetrics, BusBandwidthFactorsOfNcclTests) {
  EXPECT_DOUBLE_EQ(busbw_factor("all_reduce", 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(busbw_factor("all_gather_into", 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor("reduce_scatter_tensor", 4), 0.75);
  EXPECT_DOUBLE_EQ(busbw_factor("broadcast", 4), 1.0);
}

TEST(Intervals, UnionOfOverlappingAndDisjoint) {
  EXPECT_EQ(union_length({{0, 10}, {5, 15}, {20, 30}, {30, 31}, {2, 3}}), 26);
  EXPECT_EQ(union_length({}), 0);
}

}  // namespace
}  // namespace shardscope::profiling
