// How a data-parallel step's communication meets its compute (app/analysis/data_parallel_step):
// against the closed forms of two streams, one computing and one running collectives in turn.
#include "app/analysis/data_parallel_step.h"

#include <gtest/gtest.h>

namespace shardscope::analysis {
namespace {

// An embedding, `blocks` blocks and a head, each with the same work.
std::vector<UnitWork> units(int blocks, double forward, double backward, double gather,
                            double reduce) {
  return std::vector<UnitWork>(size_t(blocks) + 2,
                               UnitWork{forward, backward, gather, gather, reduce});
}

double total(const std::vector<UnitWork>& u, double UnitWork::*field) {
  double sum = 0;
  for (const auto& w : u) sum += w.*field;
  return sum;
}

// Without prefetch each gather is issued when its unit needs it, behind the reduce-scatter issued
// just before: nothing overlaps, and the pass takes its compute and every collective, serially.
TEST(DataParallelStep, WithoutPrefetchZero3RunsEveryCollectiveInSeries) {
  const auto u = units(6, 3e-3, 6e-3, 2e-3, 4e-3);
  const UnitPassTime t = sharded_unit_pass(u, false);
  const double compute = total(u, &UnitWork::forward_s) + total(u, &UnitWork::backward_s);
  const double comm = total(u, &UnitWork::gather_s) + total(u, &UnitWork::regather_s) +
                      total(u, &UnitWork::reduce_s);
  EXPECT_DOUBLE_EQ(t.compute_s, compute);
  EXPECT_NEAR(t.span_s, compute + comm, 1e-12);
}

// With prefetch, collectives shorter than the compute beside them hide, all but three: the first
// unit's forward gather and the head's backward gather (nothing computes before them), and the
// last reduce-scatter (nothing computes after it).
TEST(DataParallelStep, PrefetchHidesAllButTheGathersThatStartEachPassAndTheLastReduce) {
  const double gather = 1e-3, reduce = 2e-3;
  const auto u = units(6, 4e-3, 8e-3, gather, reduce);
  const UnitPassTime t = sharded_unit_pass(u, true);
  EXPECT_NEAR(t.span_s - t.compute_s, gather + gather + reduce, 1e-12);
}

// Bound by communication, prefetch keeps the communicator busy: the pass takes every collective
// and no more than the compute that cannot run beside one, and never more than without prefetch.
TEST(DataParallelStep, BoundByCommunicationThePassTakesItsCollectives) {
  const auto u = units(10, 1e-3, 2e-3, 5e-3, 10e-3);
  const double comm = 2 * total(u, &UnitWork::gather_s) + total(u, &UnitWork::reduce_s);
  const UnitPassTime with = sharded_unit_pass(u, true);
  // The communicator idles only while the last unit's forward runs before the head's backward
  // gather is issued: the pass is every collective and that forward.
  EXPECT_NEAR(with.span_s, comm + u.back().forward_s, 1e-12);
  EXPECT_LT(with.span_s, sharded_unit_pass(u, false).span_s);
}

// A unit still held when its backward comes (tied embeddings: the head's backward gathered the
// embeddings' unit) is not gathered again and waits for nothing: without prefetch, its backward
// no longer queues behind the reduce-scatter before it (2 ms), nor for its gather (1 ms).
TEST(DataParallelStep, AUnitStillHeldIsNotGatheredAgain) {
  auto u = units(2, 4e-3, 8e-3, 1e-3, 2e-3);
  const UnitPassTime regathered = sharded_unit_pass(u, false);
  u.front().regather_s = 0;
  const UnitPassTime held = sharded_unit_pass(u, false);
  EXPECT_NEAR(regathered.span_s - held.span_s, 1e-3 + 2e-3, 1e-12);
}

// Buckets are whole tensors in the order backward produces them, each closed by the tensor that
// reaches the cap (bucket_plan.cpp), the first at its own cap (DDP's Reducer).
TEST(DataParallelStep, BucketsAreWholeTensorsInBackwardsOrder) {
  // Four units, each producing a 6 MB and then a 4 MB gradient.
  const std::vector<GradientUnit> g(4, GradientUnit{1e-3, {6e6, 4e6}});
  const auto at = [](const std::vector<GradientBucket>& b) {
    std::vector<std::pair<double, size_t>> out;
    for (const auto& x : b) out.push_back({x.bytes, x.unit});
    return out;
  };
  using P = std::vector<std::pair<double, size_t>>;
  // 6 + 4 (unit 3), 6 + 4 (unit 2), then unit 1's 6 MB brings the bucket to 26: 25 reached.
  EXPECT_EQ(at(plan_gradient_buckets(g, 25e6, 25e6)), (P{{26e6, 1}, {14e6, 0}}));
  EXPECT_EQ(at(plan_gradient_buckets(g, 25e6, 1e6)), (P{{6e6, 3}, {30e6, 0}, {4e6, 0}}));
  EXPECT_EQ(plan_gradient_buckets(g, 0, 0).size(), 8u);
}

// DDP's buckets: without overlap, all of them after backward, one after another; with it, only
// what the last units' gradients fill is left when backward ends.
TEST(DataParallelStep, BucketsReducedDuringBackwardLeaveOnlyTheLastBehind) {
  // Four units of 1 ms of backward each; a collective costs 0.1 ms a MB.
  const std::vector<GradientUnit> g(4, GradientUnit{1e-3, {6e6, 4e6}});
  const auto collective = [](double bytes) { return bytes * 1e-10; };
  const auto buckets = plan_gradient_buckets(g, 25e6, 25e6);  // 26 MB at unit 1, then 14
  EXPECT_NEAR(gradient_sync_tail(g, buckets, false, collective), 4e-3, 1e-12);
  // With overlap the 26 MB go when unit 1 is done (3 ms) and run 2.6 ms, 1.6 past the end of
  // backward (4 ms); the last 14 MB follow them: 1.4 more.
  EXPECT_NEAR(gradient_sync_tail(g, buckets, true, collective), 3e-3, 1e-12);
  // A bucket a tensor keeps pace with backward: only the last unit's 10 MB (1 ms) are left.
  EXPECT_NEAR(gradient_sync_tail(g, plan_gradient_buckets(g, 1e6, 1e6), true, collective), 1e-3,
              1e-12);
  // One collective per parameter tensor, each its bytes and a fixed 50 us.
  const auto latency = [](double bytes) { return 50e-6 + bytes * 1e-10; };
  EXPECT_NEAR(gradient_sync_tail(g, plan_gradient_buckets(g, 0, 0), false, latency),
              8 * 50e-6 + 4e-3, 1e-12);
}

// Bound by its links, a sync that lets two buckets be unfinished (ZeRO-2) stalls backward where
// the communicator is behind anyway: the step ends as the last collective does, either way.
TEST(DataParallelStep, AtMostTwoInFlightStallsBackwardButNotTheEnd) {
  const std::vector<GradientUnit> g(4, GradientUnit{1e-3, {6e6, 4e6}});
  const auto slow = [](double bytes) { return bytes * 1e-9; };  // 1 ms a MB
  const auto buckets = plan_gradient_buckets(g, 1e6, 1e6);
  // The communicator starts at 1 ms and then runs 40 ms of collectives: 41 ms, 37 past backward.
  EXPECT_NEAR(gradient_sync_tail(g, buckets, true, slow), 37e-3, 1e-12);
  EXPECT_NEAR(gradient_sync_tail(g, buckets, true, slow, 2), 37e-3, 1e-12);
  StreamTimeline streams;
  gradient_sync_tail(g, buckets, true, slow, 2, &streams);
  const auto& comm = streams.comm;
  ASSERT_EQ(comm.size(), 1u);  // back to back
  EXPECT_NEAR(comm.front().start, 1e-3, 1e-12);
  EXPECT_NEAR(comm.front().end, 41e-3, 1e-12);
  // The backward's first two units (each issues two buckets), then a wait for the oldest of four
  // in flight: a gap.
  ASSERT_GE(streams.compute.size(), 2u);
  EXPECT_NEAR(streams.compute.front().end, 2e-3, 1e-12);
  EXPECT_GT(streams.compute[1].start, streams.compute.front().end);
}

}  // namespace
}  // namespace shardscope::analysis
