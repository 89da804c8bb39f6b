#include "app/gui/memory_breakdown.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace shardscope::gui
