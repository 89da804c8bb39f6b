#include "profiling/io/chrome_tracks.h"

#include <algorithm>

namespace shardscope::profiling {
namespace {

// Whether Perfetto closes the open slice `open` when a slice of duration `new_dur` begins at
// `ts`: intervals are closed on the left and open on the right, except that instants stack on
// instants (slice_tracker.cc, MaybeCloseStack).
bool closes(const Event& open, int64_t ts, int64_t new_dur) {
  return open.t1_ns < ts || (open.t1_ns == ts && !(open.t1_ns == open.t0_ns && new_dur == 0));
}

std::string lane_label(const RankTrace& rank, size_t lane) {
  if (lane < rank.lanes.size() && !rank.lanes[lane].empty()) return rank.lanes[lane];
  return "lane " + std::to_string(lane);
}

}  // namespace

ChromeThreads assign_chrome_threads(const RankTrace& rank) {
  const auto& events = rank.events;
  size_t lanes = rank.lanes.size();
  for (const auto& e : events) lanes = std::max<size_t>(lanes, e.lane + 1u);
  std::vector<std::vector<uint32_t>> by_lane(lanes);
  for (uint32_t i = 0; i < events.size(); ++i) by_lane[events[i].lane].push_back(i);

  std::vector<int> track_of(events.size(), 0);
  std::vector<size_t> tracks_in_lane(lanes, 1);
  std::vector<std::vector<const Event*>> open;  // per track of the lane: its open slices
  for (size_t lane = 0; lane < lanes; ++lane) {
    auto& order = by_lane[lane];
    // The order Perfetto reads them in: by start, the longest first, then as written. Events are
    // usually in start order already (Trace::normalise), which the sort leaves cheap.
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      const Event& x = events[a];
      const Event& y = events[b];
      if (x.t0_ns != y.t0_ns) return x.t0_ns < y.t0_ns;
      return x.t1_ns - x.t0_ns > y.t1_ns - y.t0_ns;
    });
    // A call takes a slot to itself; other spans nest in whatever is open on their track.
    const bool slots = lane == kCommLane;
    open.clear();
    for (uint32_t i : order) {
      const Event& e = events[i];
      const int64_t dur = e.t1_ns - e.t0_ns;
      size_t track = 0;
      for (; track < open.size(); ++track) {
        auto& stack = open[track];
        // Whatever closes now would close for any later event too: popping while probing is safe.
        while (!stack.empty() && closes(*stack.back(), e.t0_ns, dur)) stack.pop_back();
        if (stack.empty() || (!slots && e.t1_ns <= stack.back()->t1_ns)) break;
      }
      if (track == open.size()) open.emplace_back();
      open[track].push_back(&e);
      track_of[i] = static_cast<int>(track);
    }
    tracks_in_lane[lane] = std::max<size_t>(1, open.size());
  }

  ChromeThreads out;
  std::vector<int> first_tid(lanes);
  int tid = 1;
  for (size_t lane = 0; lane < lanes; ++lane) {
    first_tid[lane] = tid;
    const std::string label = lane_label(rank, lane);
    for (size_t k = 0; k < tracks_in_lane[lane]; ++k) {
      std::string name = label;
      if (lane == kCommLane) {
        name += " " + std::to_string(k);
      } else if (k > 0) {
        name += " (overlap " + std::to_string(k) + ")";
      }
      out.threads.push_back({tid++, static_cast<int>(lane), std::move(name)});
    }
  }
  out.tid_of_event.resize(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    out.tid_of_event[i] = first_tid[events[i].lane] + track_of[i];
  }
  return out;
}

}  // namespace shardscope::profiling
