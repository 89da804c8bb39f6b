#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// One thread of a rank's process in the Chrome trace: a lane, or a part of one.
struct ChromeThread {
  int tid = 1;
  int lane = 0;
  std::string name;  // what the viewer shows: "host", "comm 0", "comm 1", ...
};

// A rank's lanes as Chrome threads. Perfetto and chrome://tracing need the complete (X) events
// of one thread to nest; they drop one that partially overlaps another. Collectives in flight
// together do overlap, so the comm lane becomes one thread per concurrency slot ("comm 0",
// "comm 1", ...), each call on the lowest slot free when it is issued; any other lane keeps
// one thread unless some of its spans fail to nest, which then go to "<lane> (overlap k)".
// Tids count from 1 (Perfetto reads tid 0 as "the pid"), in lane order, every lane at least
// one thread so that its name survives a round trip.
struct ChromeThreads {
  std::vector<ChromeThread> threads;
  std::vector<int> tid_of_event;  // parallel to RankTrace::events
};
ChromeThreads assign_chrome_threads(const RankTrace& rank);

}  // namespace shardscope::profiling
