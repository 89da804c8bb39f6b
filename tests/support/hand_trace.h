#pragma once

#include <cstdint>
#include <string>

#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// A trace built by hand: per rank, host spans and communication calls with their waits.
class HandTrace {
 public:
  explicit HandTrace(int ranks) {
    for (int r = 0; r < ranks; ++r) {
      RankTrace rank;
      rank.rank = r;
      rank.lanes = {"host", "comm"};
      trace_.ranks.push_back(rank);
    }
  }
  // `off_cpu_us`: how long the recording thread was off its core within the span.
  void span(int rank, const char* name, Category category, int64_t t0, int64_t t1, int step = 0,
            int32_t off_cpu_us = 0) {
    Event e;
    e.t0_ns = t0;
    e.t1_ns = t1;
    e.name = trace_.intern(name);
    e.category = category;
    e.step = step;
    e.off_cpu_us = off_cpu_us;
    trace_.ranks[rank].events.push_back(e);
  }
  // A call issued at `issue`, completed at `complete`, waited for from `wait0` to `wait1`.
  void call(int rank, const char* op, const char* group, int64_t seq, int group_size, int peer,
            int64_t bytes, int64_t issue, int64_t complete, int64_t wait0, int64_t wait1) {
    Event e;
    e.t0_ns = issue;
    e.t1_ns = complete;
    e.name = trace_.intern(op);
    e.group = trace_.intern(group);
    e.seq = seq;
    e.group_size = static_cast<int16_t>(group_size);
    e.peer = static_cast<int16_t>(peer);
    e.bytes = bytes;
    e.category = Category::kCollective;
    e.lane = kCommLane;
    e.step = 0;
    trace_.ranks[rank].events.push_back(e);
    if (wait0 >= 0) {
      Event w = e;
      w.name = trace_.intern(std::string("wait ") + op);
      w.category = Category::kWait;
      w.lane = kHostLane;
      w.t0_ns = wait0;
      w.t1_ns = wait1;
      trace_.ranks[rank].events.push_back(w);
    }
  }
  Trace build() {
    trace_.normalise();
    return trace_;
  }

 private:
  Trace trace_;
};

}  // namespace shardscope::profiling
