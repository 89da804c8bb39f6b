#include "profiling/trace/trace_builder.h"

#include <algorithm>

namespace shardscope::profiling {

Trace build_trace(const RunRecord& run, const std::vector<const RankEventLog*>& logs,
                  const std::vector<std::string>& failures) {
  Trace trace;
  trace.run = run;
  for (size_t r = 0; r < logs.size(); ++r) {
    RankTrace rank;
    rank.rank = logs[r]->rank();
    rank.lanes = {"host", "comm"};
    if (r < failures.size()) rank.failure = failures[r];
    int64_t last = 0;
    const auto calls = logs[r]->snapshot();
    const auto spans = logs[r]->spans();
    for (const auto& c : calls) {
      last = std::max({last, c.t_issue_ns, c.t_complete_ns, c.t_wait_end_ns});
    }
    for (const auto& s : spans) last = std::max({last, s.t0_ns, s.t1_ns});

    for (const auto& s : spans) {
      Event e;
      e.t0_ns = s.t0_ns;
      e.t1_ns = s.t1_ns != 0 ? s.t1_ns : last;
      e.name = trace.intern(s.name);
      e.category = s.category;
      e.step = s.step;
      e.micro = s.micro;
      e.off_cpu_us = s.off_cpu_us;
      e.lane = kHostLane;
      rank.events.push_back(e);
    }
    for (const auto& c : calls) {
      Event e;
      e.t0_ns = c.t_issue_ns;
      e.t1_ns = std::max({c.t_issue_ns, c.t_complete_ns, c.t_wait_end_ns});
      e.name = trace.intern(c.op);
      e.group = trace.intern(c.group);
      e.category = Category::kCollective;
      e.lane = kCommLane;
      e.bytes = c.bytes;
      e.seq = static_cast<int64_t>(c.seq);
      e.peer = static_cast<int16_t>(c.peer);
      e.group_size = static_cast<int16_t>(c.group_size);
      e.step = c.step;
      e.micro = c.micro;
      rank.events.push_back(e);
      if (c.t_wait_begin_ns != 0 && c.t_wait_end_ns > c.t_wait_begin_ns) {
        Event wait = e;
        wait.name = trace.intern("wait " + c.op);
        wait.category = Category::kWait;
        wait.lane = kHostLane;
        wait.t0_ns = c.t_wait_begin_ns;
        wait.t1_ns = c.t_wait_end_ns;
        rank.events.push_back(wait);
      }
    }
    // Every category is recorded by the memory tracker, from each block's provenance: none is
    // derived here.
    for (const auto& m : logs[r]->memory()) rank.counters.push_back({m.t_ns, m.bytes, m.kind});
    trace.ranks.push_back(std::move(rank));
  }
  trace.normalise();
  return trace;
}

}  // namespace shardscope::profiling
