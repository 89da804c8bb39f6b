#include "profiling/trace/trace_builder.h"

#include <gtest/gtest.h>

#include "profiling/record/clock.h"

namespace shardscope::profiling {
namespace {

TEST(TraceBuilder, CallsSpansWaitsAndCountersLandOnTheirLanes) {
  RankEventLog log(3);
  log.set_position(2, 1);
  const size_t span = log.begin_span("forward blocks.0", Category::kForward);
  CommEvent call;
  call.op = "all_reduce";
  call.group = "world";
  call.bytes = 64;
  call.seq = 9;
  call.group_size = 4;
  call.t_issue_ns = now_ns();
  const size_t index = log.append(call);
  log.stamp_wait_begin(index, now_ns());
  log.stamp_complete(index, now_ns() + 10);
  log.stamp_wait_end(index, now_ns() + 20);
  log.end_span(span);
  log.begin_span("never closed", Category::kBackward);  // a rank that failed mid-backward

  Trace t = build_trace(run_record_from_json(R"({"world":4})"), {&log}, {"boom"});
  ASSERT_EQ(t.ranks.size(), 1u);
  const RankTrace& r = t.ranks[0];
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.failure, "boom");
  EXPECT_EQ(r.lanes, (std::vector<std::string>{"host", "comm"}));
  int collectives = 0, waits = 0, spans = 0;
  for (const auto& e : r.events) {
    EXPECT_LE(e.t0_ns, e.t1_ns);
    if (e.category == Category::kCollective) {
      ++collectives;
      EXPECT_EQ(e.lane, kCommLane);
      EXPECT_EQ(e.seq, 9);
      EXPECT_EQ(e.bytes, 64);
      EXPECT_EQ(e.step, 2);
      EXPECT_EQ(e.micro, 1);
      EXPECT_EQ(t.str(e.group), "world");
    } else if (e.category == Category::kWait) {
      ++waits;
      EXPECT_EQ(e.lane, kHostLane);
      EXPECT_EQ(t.str(e.name), "wait all_reduce");
    } else {
      ++spans;
      EXPECT_EQ(e.lane, kHostLane);
      EXPECT_GT(e.t1_ns, 0) << "open spans are closed at the rank's last timestamp";
    }
  }
  EXPECT_EQ(collectives, 1);
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(spans, 2);
}

TEST(TraceBuilder, MemoryCategoriesAreTakenAsRecordedNotDerived) {
  RankEventLog log(0);
  log.add_memory(MemoryKind::kParameters, 100);
  log.add_memory(MemoryKind::kAllocated, 1450);
  Trace t = build_trace(RunRecord{}, {&log});
  std::vector<int64_t> activations;
  int64_t allocated = 0;
  for (const auto& c : t.ranks[0].counters) {
    if (c.kind == MemoryKind::kActivations) activations.push_back(c.bytes);
    if (c.kind == MemoryKind::kAllocated) allocated = c.bytes;
  }
  EXPECT_TRUE(activations.empty());  // no remainder made up as "activations"
  EXPECT_EQ(allocated, 1450);
}

}  // namespace
}  // namespace shardscope::profiling
