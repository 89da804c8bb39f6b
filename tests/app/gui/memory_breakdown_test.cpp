#include "app/gui/memory_breakdown.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope::gui {
namespace {

using profiling::MemoryKind;

TEST(MemoryBreakdown, CategoriesAtTheMomentOfMostAllocated) {
  profiling::RankTrace r;
  r.counters = {{0, 100, MemoryKind::kParameters},  {0, 400, MemoryKind::kAllocated},
                {10, 100, MemoryKind::kGradients},  {10, 700, MemoryKind::kActivations},
                {10, 1000, MemoryKind::kAllocated}, {20, 0, MemoryKind::kActivations},
                {20, 300, MemoryKind::kAllocated}};
  const MemoryBreakdown peak = peak_breakdown(r);
  EXPECT_EQ(peak.t_ns, 10);
  EXPECT_EQ(peak.of(MemoryKind::kParameters), 100);
  EXPECT_EQ(peak.of(MemoryKind::kGradients), 100);
  EXPECT_EQ(peak.of(MemoryKind::kActivations), 700);
  EXPECT_EQ(peak.of(MemoryKind::kAllocated), 1000);
  // A trace from before provenance tracking: what no category named is shown as temporaries.
  EXPECT_EQ(peak.of(MemoryKind::kTemporaries), 100);
  EXPECT_EQ(peak.total(), 1000);
}

TEST(MemoryBreakdown, RecordedTemporariesAreTakenAsRecorded) {
  profiling::RankTrace r;
  // The tracker's own peak breakdown, logged at the peak's time: nothing is derived from it,
  // even where the categories do not add up to the total (they always do when recorded).
  r.counters = {{10, 1000, MemoryKind::kAllocated},  {10, 100, MemoryKind::kParameters},
                {10, 600, MemoryKind::kActivations}, {10, 250, MemoryKind::kTemporaries},
                {20, 300, MemoryKind::kAllocated},   {20, 0, MemoryKind::kActivations}};
  const MemoryBreakdown peak = peak_breakdown(r);
  EXPECT_EQ(peak.t_ns, 10);
  EXPECT_EQ(peak.of(MemoryKind::kTemporaries), 250);
  EXPECT_EQ(peak.of(MemoryKind::kActivations), 600);
}

TEST(MemoryBreakdown, WithoutAllocationSamplesThePeakIsTheLargestSum) {
  profiling::RankTrace r;
  r.counters = {{0, 100, MemoryKind::kParameters},
                {5, 300, MemoryKind::kActivations},
                {9, 0, MemoryKind::kActivations},
                {9, 200, MemoryKind::kOptimizerState}};
  const MemoryBreakdown peak = peak_breakdown(r);
  EXPECT_EQ(peak.t_ns, 5);
  EXPECT_EQ(peak.total(), 400);
}

// What the Memory tab's bar shows for a run: rank 0 at its peak, and the model's fp32 bytes.
std::pair<MemoryBreakdown, double> peak_of(const std::string& strategy) {
  Config c = test::tiny_config(strategy, 4, 1);
  c.steps = 2;
  c.reference = false;
  const RunSummary s = run_training(c);
  EXPECT_TRUE(s.ok) << strategy << ": " << s.failure;
  return {peak_breakdown(s.trace.ranks.at(0)), 4.0 * double(s.trace.run.result->parameters)};
}

// Gradients that live in buckets are gradients: between steps .grad is freed, and DDP's buckets
// are where a rank keeps its gradients, all of them (the formula's green band). ZeRO-2 keeps a
// shard of them, so its green is smaller, as the ZeRO paper's text says.
TEST(MemoryBreakdown, GradientsInBucketsAreGradientsAndZeroTwoDividesThem) {
  for (const char* strategy : {"torch_ddp", "ddp_bucketed", "zero1"}) {
    const auto [peak, gradients] = peak_of(strategy);
    EXPECT_GE(peak.of(MemoryKind::kGradients), 0.99 * gradients) << strategy;
    EXPECT_LT(peak.of(MemoryKind::kCommBuffers), 0.01 * gradients) << strategy;
  }
  const auto [ddp, gradients] = peak_of("torch_ddp");
  const auto [zero2, unused] = peak_of("zero2");
  EXPECT_LT(zero2.of(MemoryKind::kGradients), 0.5 * ddp.of(MemoryKind::kGradients));
}

// The moment of a peak, named by the innermost span then running: two runs' bars can differ in
// what was alive at their peaks because their peaks are different moments.
TEST(MemoryBreakdown, APeaksMomentIsTheInnermostSpanAtIt) {
  profiling::Trace trace;
  profiling::RankTrace rank;
  auto span = [&](const char* name, int64_t t0, int64_t t1, int step) {
    profiling::Event e;
    e.name = trace.intern(name);
    e.t0_ns = t0;
    e.t1_ns = t1;
    e.step = step;
    rank.events.push_back(e);
  };
  span("step 1", 100, 200, 1);
  span("backward blocks.0", 150, 180, 1);
  EXPECT_EQ(peak_moment(trace, rank, 160), "step 1, backward blocks.0");
  EXPECT_EQ(peak_moment(trace, rank, 120), "step 1, step 1");
  EXPECT_EQ(peak_moment(trace, rank, 50), "between steps");
}

}  // namespace
}  // namespace shardscope::gui
