// Host tracing through a real run: what every rank did, per step and micro-batch, lands in the
// trace model with nothing lost.
#include <gtest/gtest.h>

#include <map>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "profiling/trace/trace.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

using profiling::Category;

std::map<Category, int> count_by_category(const profiling::RankTrace& r) {
  std::map<Category, int> n;
  for (const auto& e : r.events) ++n[e.category];
  return n;
}

TEST(Tracing, EveryPhaseOfEveryStepIsRecorded) {
  Config c = test::tiny_config("ddp_bucketed", 2, 2);
  c.steps = 3;
  c.reference = false;
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  const profiling::Trace& t = s.trace;
  ASSERT_EQ(t.ranks.size(), 2u);
  const int layers = c.model.layers, micros = c.steps * c.grad_accum;
  for (const auto& r : t.ranks) {
    SCOPED_TRACE("rank " + std::to_string(r.rank));
    auto n = count_by_category(r);
    EXPECT_EQ(n[Category::kStep], c.steps);
    EXPECT_EQ(n[Category::kMicroBatch], micros);
    EXPECT_EQ(n[Category::kForward], micros * (layers + 2));   // embeddings, blocks, head
    EXPECT_EQ(n[Category::kBackward], micros * (layers + 1));  // head and blocks
    EXPECT_EQ(n[Category::kGradSync], c.steps);
    EXPECT_EQ(n[Category::kOptimizer], c.steps);
    // Every communication call is on the comm lane, none lost.
    EXPECT_EQ(static_cast<size_t>(n[Category::kCollective]), s.ranks[r.rank].comm_events.size());
    for (const auto& e : r.events) {
      EXPECT_LE(e.t0_ns, e.t1_ns);
      if (e.category == Category::kCollective) {
        EXPECT_EQ(e.lane, profiling::kCommLane);
      } else {
        EXPECT_EQ(e.lane, profiling::kHostLane);
      }
      if (e.category == Category::kForward || e.category == Category::kBackward) {
        EXPECT_GE(e.step, 0);
        EXPECT_GE(e.micro, 0);
      }
    }
    // Every category, recorded by provenance with each allocation sample (none derived from
    // the others), and the peak's exact breakdown at the peak's time.
    std::map<profiling::MemoryKind, int> samples;
    for (const auto& counter : r.counters) ++samples[counter.kind];
    EXPECT_GT(samples[profiling::MemoryKind::kAllocated], 1);
    for (int k = 0; k < profiling::kMemoryCategoryCount; ++k) {
      EXPECT_EQ(samples[static_cast<profiling::MemoryKind>(k)],
                samples[profiling::MemoryKind::kAllocated])
          << profiling::memory_kind_name(static_cast<profiling::MemoryKind>(k));
    }
    int64_t at_peak = 0;
    for (int64_t b : s.ranks[r.rank].peak_breakdown) at_peak += b;
    EXPECT_EQ(at_peak, s.ranks[r.rank].peak_allocated_bytes);
  }
}

TEST(Tracing, HostSpansNestOnTheHostLane) {
  for (const char* strategy : {"ddp_bucketed", "fsdp", "torch_ddp"}) {
    SCOPED_TRACE(strategy);
    Config c = test::tiny_config(strategy, 2, 1);
    c.steps = 2;
    c.reference = false;
    c.strategy_options.activation_checkpointing = std::string(strategy) != "torch_ddp";
    RunSummary s = run_training(c);
    ASSERT_TRUE(s.ok) << s.failure;
    for (const auto& r : s.trace.ranks) {
      std::vector<const profiling::Event*> open;
      for (const auto& e : r.events) {
        if (e.lane != profiling::kHostLane) continue;
        while (!open.empty() && open.back()->t1_ns <= e.t0_ns) open.pop_back();
        if (!open.empty()) {
          EXPECT_LE(e.t1_ns, open.back()->t1_ns)
              << s.trace.str(e.name) << " overlaps " << s.trace.str(open.back()->name);
        }
        open.push_back(&e);
      }
    }
  }
}

TEST(Tracing, AFailedRunKeepsWhatWasRecordedAndNamesTheRank) {
  Config c = test::tiny_config("ddp_bucketed", 2, 1);
  c.steps = 3;
  c.reference = false;
  c.fault.rank = 1;
  c.fault.step = 2;
  RunSummary s = run_training(c);
  ASSERT_FALSE(s.ok);
  ASSERT_EQ(s.trace.ranks.size(), 2u);
  EXPECT_NE(s.trace.ranks[1].failure.find("injected fault"), std::string::npos);
  int steps = 0;
  for (const auto& e : s.trace.ranks[1].events) steps += e.category == Category::kStep;
  EXPECT_EQ(steps, 2) << "the two steps before the fault";
}

}  // namespace
}  // namespace shardscope
