#include "app/perf/synthetic_trace.h"

namespace shardscope::perf {

using profiling::Category;
using profiling::Event;

profiling::Trace synthetic_trace(size_t events) {
  profiling::Trace t;
  const int ranks = 8;
  const char* names[] = {"forward blocks.0", "backward blocks.0", "all_reduce", "wait all_reduce",
                         "optimizer step"};
  const Category categories[] = {Category::kForward, Category::kBackward, Category::kCollective,
                                 Category::kWait, Category::kOptimizer};
  constexpr size_t kPerStep = 500;
  const uint32_t group = t.intern("world");
  const uint32_t step_name = t.intern("step");
  for (int r = 0; r < ranks; ++r) {
    profiling::RankTrace rank;
    rank.rank = r;
    rank.lanes = {"host", "comm"};
    const size_t n = events / ranks;
    int64_t t0 = 1'000'000'000 + r * 50;
    for (size_t i = 0; i < n; ++i) {
      if (i % kPerStep == 0) {
        Event s;
        s.name = step_name;
        s.category = Category::kStep;
        s.t0_ns = t0;
        s.t1_ns = t0 + static_cast<int64_t>(kPerStep) * 1000 - 100;
        s.step = static_cast<int32_t>(i / kPerStep);
        rank.events.push_back(s);
        ++i;
        if (i >= n) break;
      }
      Event e;
      const int kind = static_cast<int>(i % 5);
      e.name = t.intern(names[kind]);
      e.category = categories[kind];
      e.lane = e.category == Category::kCollective ? profiling::kCommLane : profiling::kHostLane;
      e.t0_ns = t0;
      e.t1_ns = t0 + 800;
      e.step = static_cast<int32_t>(i / kPerStep);
      e.seq = e.category == Category::kCollective ? static_cast<int64_t>(i) : -1;
      e.bytes = e.category == Category::kCollective ? 1 << 20 : 0;
      e.group = group;
      e.group_size = e.category == Category::kCollective ? ranks : 0;
      t0 += 1000;
      rank.events.push_back(e);
      if (i % 64 == 0) {
        rank.counters.push_back(
            {t0, static_cast<int64_t>((i % 4096) << 10), profiling::MemoryKind::kAllocated});
      }
    }
    t.ranks.push_back(std::move(rank));
  }
  t.normalise();
  return t;
}

}  // namespace shardscope::perf
