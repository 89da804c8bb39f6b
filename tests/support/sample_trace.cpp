#include "tests/support/sample_trace.h"

#include <gtest/gtest.h>

namespace shardscope::test {

using profiling::Category;
using profiling::Event;
using profiling::MemoryKind;
using profiling::Trace;

profiling::Trace sample_trace() {
  Trace t;
  t.run = profiling::run_record_from_json(R"({"strategy":"ddp_bucketed","world":2})");
  const int64_t base = 1'700'000'000'123'456'789;  // a realistic steady-clock value
  for (int r = 0; r < 2; ++r) {
    profiling::RankTrace rank;
    rank.rank = r;
    rank.lanes = {"host", "comm"};
    auto add = [&](const char* name, Category c, int64_t t0, int64_t t1, uint8_t lane) {
      Event e;
      e.name = t.intern(name);
      e.category = c;
      e.t0_ns = base + t0 + r * 7;
      e.t1_ns = base + t1 + r * 7;
      e.lane = lane;
      e.step = 0;
      e.micro = c == Category::kStep ? -1 : 0;
      rank.events.push_back(e);
      return &rank.events.back();
    };
    add("step 0", Category::kStep, 0, 10'000, profiling::kHostLane);
    add("micro-batch 0", Category::kMicroBatch, 10, 6'000, profiling::kHostLane);
    add("forward blocks.0", Category::kForward, 20, 2'000, profiling::kHostLane);
    add("backward blocks.0", Category::kBackward, 2'000, 5'999, profiling::kHostLane)->off_cpu_us =
        1 + r;
    Event* ar =
        add("all_reduce", Category::kCollective, 3'000 + r * 500, 7'000, profiling::kCommLane);
    ar->bytes = 1'000'000;
    ar->seq = 4;
    ar->group = t.intern("world");
    ar->group_size = 2;
    Event* ag = add("all_gather_into", Category::kCollective, 7'100, 7'300, profiling::kCommLane);
    ag->bytes = 4096;
    ag->seq = 5;
    ag->group = t.intern("world");
    ag->group_size = 2;
    Event* p2p =
        add(r == 0 ? "send" : "recv", Category::kCollective, 8'000, 8'500, profiling::kCommLane);
    p2p->peer = static_cast<int16_t>(1 - r);
    p2p->seq = 0;
    p2p->bytes = 128;
    add("gradient sync", Category::kGradSync, 6'000, 7'050, profiling::kHostLane);
    Event* wait = add("wait all_reduce", Category::kWait, 6'010, 7'000, profiling::kHostLane);
    wait->bytes = 1'000'000;
    wait->seq = 4;
    wait->group = t.intern("world");
    add("optimizer step", Category::kOptimizer, 7'060, 9'000, profiling::kHostLane);
    rank.counters.push_back({base + 9'500, 43'000, MemoryKind::kParameters});
    rank.counters.push_back({base + 9'500, 87'000, MemoryKind::kOptimizerState});
    if (r == 1) rank.failure = "injected fault (kind=throw) at step 1";
    t.ranks.push_back(rank);
  }
  t.normalise();
  return t;
}

void expect_same_trace(const profiling::Trace& a, const profiling::Trace& b) {
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    const auto& x = a.ranks[r];
    const auto& y = b.ranks[r];
    EXPECT_EQ(x.rank, y.rank);
    EXPECT_EQ(x.lanes, y.lanes);
    EXPECT_EQ(x.failure, y.failure);
    ASSERT_EQ(x.events.size(), y.events.size()) << "rank " << x.rank;
    for (size_t i = 0; i < x.events.size(); ++i) {
      const Event& e = x.events[i];
      const Event& f = y.events[i];
      SCOPED_TRACE("rank " + std::to_string(x.rank) + " event " + a.str(e.name));
      EXPECT_EQ(a.str(e.name), b.str(f.name));
      EXPECT_EQ(a.str(e.group), b.str(f.group));
      EXPECT_EQ(e.t0_ns, f.t0_ns);
      EXPECT_EQ(e.t1_ns, f.t1_ns);
      EXPECT_EQ(e.bytes, f.bytes);
      EXPECT_EQ(e.seq, f.seq);
      EXPECT_EQ(e.step, f.step);
      EXPECT_EQ(e.micro, f.micro);
      EXPECT_EQ(e.peer, f.peer);
      EXPECT_EQ(e.group_size, f.group_size);
      EXPECT_EQ(e.off_cpu_us, f.off_cpu_us);
      EXPECT_EQ(e.lane, f.lane);
      EXPECT_EQ(e.category, f.category);
    }
    ASSERT_EQ(x.counters.size(), y.counters.size());
    for (size_t i = 0; i < x.counters.size(); ++i) {
      EXPECT_EQ(x.counters[i].t_ns, y.counters[i].t_ns);
      EXPECT_EQ(x.counters[i].bytes, y.counters[i].bytes);
      EXPECT_EQ(x.counters[i].kind, y.counters[i].kind);
    }
  }
}

}  // namespace shardscope::test
