// --serialize-compute: rank threads take turns on the device, so no two ranks ever compute at
// once, training is unchanged, and the time spent waiting for a turn is marked for projection.
#include "engine/device_turns.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/run.h"
#include "engine/weights.h"
#include "profiling/trace_metrics.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

using profiling::Intervals;
using profiling::merged;

// `x` without `y` (both merged).
Intervals minus(const Intervals& x, const Intervals& y) {
  Intervals out;
  for (auto [a, b] : x) {
    for (const auto& [c, d] : y) {
      if (d <= a || c >= b) continue;
      if (c > a) out.push_back({a, c});
      a = std::max(a, d);
      if (a >= b) break;
    }
    if (a < b) out.push_back({a, b});
  }
  return out;
}

// When a rank computed: its forward and backward spans, less the time it waited inside them
// (for communication, or for its turn).
Intervals computing(const profiling::RankTrace& rank) {
  Intervals spans, waits;
  for (const auto& e : rank.events) {
    if (e.lane != profiling::kHostLane) continue;
    if (e.category == profiling::Category::kForward ||
        e.category == profiling::Category::kBackward) {
      spans.push_back({e.t0_ns, e.t1_ns});
    }
    if (e.category == profiling::Category::kWait) waits.push_back({e.t0_ns, e.t1_ns});
  }
  return minus(merged(spans), merged(waits));
}

TEST(SerializeCompute, RanksNeverComputeAtOnceAndTrainTheSame) {
  for (const char* strategy : {"ddp_bucketed", "fsdp", "tp"}) {
    Config c = test::tiny_config(strategy, 2, 2);
    c.reference = false;
    RunSummary together = run_training(c);
    c.serialize_compute = true;
    RunSummary in_turns = run_training(c);
    ASSERT_TRUE(in_turns.ok) << strategy << ": " << in_turns.failure;
    EXPECT_EQ(weights_checksum(in_turns.weights), weights_checksum(together.weights)) << strategy;

    const Intervals rank0 = computing(in_turns.trace.ranks[0]);
    const Intervals rank1 = computing(in_turns.trace.ranks[1]);
    ASSERT_FALSE(rank0.empty());
    ASSERT_FALSE(rank1.empty());
    EXPECT_EQ(profiling::intersection_length(rank0, rank1), 0)
        << strategy << ": both ranks computed at once";
    int turn_waits = 0;
    for (const auto& r : in_turns.trace.ranks) {
      for (const auto& e : r.events) {
        if (in_turns.trace.str(e.name) == DeviceTurns::kWaitName) ++turn_waits;
      }
    }
    EXPECT_GT(turn_waits, 0) << strategy;
  }
}

}  // namespace
}  // namespace shardscope
