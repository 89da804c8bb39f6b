// How a data-parallel step's communication meets its compute (app/analysis/data_parallel_step):
// against the closed forms of two streams, one computing and one running collectives in turn.
#include "app/analysis/data_parallel_step.h"

#include <gtest/gtest.h>

namespace shardscope::analysis {
namespace {

// An embedding, `blocks` blocks and a head, each with the same work.
std::vector<UnitWork> units(int blocks, double forward, double backward, double gather,
                            double reduce) {
  return std::vector<UnitWork>(size_t(blocks) + 2, UnitWork{forward, backward, gather, reduce});
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
  const double comm = 2 * total(u, &UnitWork::gather_s) + total(u, &UnitWork::reduce_s);
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
  EXPECT_GE(with.span_s, comm);
  // Forward's last unit computes after the last gather, backward's first unit before its
  // reduce-scatter, while the head's backward gather waits behind forward.
  EXPECT_LE(with.span_s, comm + u.back().forward_s + u.back().backward_s + 1e-12);
  EXPECT_LT(with.span_s, sharded_unit_pass(u, false).span_s);
}

// DDP's buckets: without overlap, all of them after backward, one after another; with it, only
// what the last units' gradients fill is left when backward ends.
TEST(DataParallelStep, BucketsReducedDuringBackwardLeaveOnlyTheLastBehind) {
  // Four units of 10 MB of gradients each, 1 ms of backward each; a collective costs 0.1 ms a MB.
  const std::vector<GradientUnit> g(4, GradientUnit{1e-3, 10e6, 4});
  const auto collective = [](double bytes) { return bytes * 1e-10; };
  // Buckets of 25 MB: the 40 MB go as one of 25 and one of 15.
  EXPECT_NEAR(gradient_sync_tail(g, 25e6, false, collective), 4e-3, 1e-12);
  // With overlap the first bucket fills with the third unit (at 3 ms) and runs 2.5 ms, past the
  // end of backward (4 ms) by 1.5; the last 15 MB follow it: 1.5 more.
  EXPECT_NEAR(gradient_sync_tail(g, 25e6, true, collective), 3e-3, 1e-12);
  // Small buckets keep pace with backward: only the last unit's 10 MB (1 ms) are left.
  EXPECT_NEAR(gradient_sync_tail(g, 1e6, true, collective), 1e-3, 1e-12);
  // One collective per parameter tensor: each costs its bytes and a fixed 50 us.
  const auto latency = [](double bytes) { return 50e-6 + bytes * 1e-10; };
  EXPECT_NEAR(gradient_sync_tail(g, 0, false, latency), 16 * 50e-6 + 4e-3, 1e-12);
  EXPECT_NEAR(in_buckets(40e6, 25e6, latency), 2 * 50e-6 + 4e-3, 1e-12);
}

}  // namespace
}  // namespace shardscope::analysis
