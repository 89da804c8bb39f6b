#include "profiling/projection/device_model.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace shardscope::profiling {
namespace {

enum class Piece {
  kDevice,  // work the device does (forward, backward, optimizer, gradient sync)
  kHost,    // what the host does between device work
  kWait,    // the host waits on a communication call: the replay prices it
  kTurn,    // a wait for a turn on a shared device: no time on a device of one's own
};

Piece piece_of(const Trace& trace, const Event* inner) {
  if (inner == nullptr) return Piece::kHost;
  switch (inner->category) {
    case Category::kForward:
    case Category::kBackward:
    case Category::kOptimizer:
    case Category::kGradSync:
      return Piece::kDevice;
    case Category::kWait:
      return trace.str(inner->name) == kDeviceTurnWaitName ? Piece::kTurn : Piece::kWait;
    default:
      return Piece::kHost;
  }
}

// A span's name as work: "forward micro-batch 3" and "forward micro-batch 5" do the same work.
std::string work_name(const std::string& name) {
  static const std::string kMicro = "micro-batch ";
  std::string out;
  for (size_t i = 0; i < name.size();) {
    if (name.compare(i, kMicro.size(), kMicro) == 0) {
      out += kMicro + "#";
      i += kMicro.size();
      while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
    } else {
      out += name[i++];
    }
  }
  return out;
}

struct Segment {
  int64_t a = 0, b = 0;  // measured
  Piece kind = Piece::kHost;
  std::string key;  // what work it is
  // b - a, less its share of the time its thread was off its core (off_cpu_shares).
  int64_t on_core_ns = 0;
  // The innermost span over it: an index into the rank's spans (their count where none).
  size_t inner = 0;
};

// Where the recording measured how long its thread was off its core within each span (a busy
// machine preempting it: a device of its own would not have), that time is taken out of the
// span's own pieces, in proportion to their lengths. A span's own: what its children's off-core
// time does not already count (a wait's, all of it).
void off_cpu_shares(const std::vector<const Event*>& spans, std::vector<Segment>& segments) {
  const size_t none = spans.size();
  std::vector<int64_t> own_off(spans.size()), own_wall(spans.size());
  bool measured = false;
  for (size_t i = 0; i < spans.size(); ++i) {
    own_off[i] = int64_t{spans[i]->off_cpu_us} * 1000;
    measured = measured || own_off[i] > 0;
  }
  if (!measured) return;  // each piece keeps its wall time
  // Each span's parent: the innermost one that encloses it, found in order of start (the longer
  // of two that start together is the outer).
  std::vector<size_t> order(spans.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return spans[x]->t0_ns != spans[y]->t0_ns ? spans[x]->t0_ns < spans[y]->t0_ns
                                              : spans[x]->t1_ns > spans[y]->t1_ns;
  });
  std::vector<size_t> open;
  for (size_t i : order) {
    while (!open.empty() && spans[open.back()]->t1_ns < spans[i]->t1_ns) open.pop_back();
    // A wait is counted as off the core all through: a communication call's wait is built
    // from the call's own stamps, with no measure of its thread, and blocks it.
    const int64_t child_off = spans[i]->category == Category::kWait
                                  ? spans[i]->t1_ns - spans[i]->t0_ns
                                  : std::max<int64_t>(0, int64_t{spans[i]->off_cpu_us} * 1000);
    if (!open.empty()) own_off[open.back()] -= child_off;
    open.push_back(i);
  }
  for (const Segment& s : segments) {
    if (s.inner != none) own_wall[s.inner] += s.b - s.a;
  }
  for (Segment& s : segments) {
    const int64_t wall = s.b - s.a;
    const size_t i = s.inner;
    if (i == none || own_off[i] <= 0 || own_wall[i] <= 0) continue;
    // wall x off / own wall, in integers wide enough for any span: never below 0, never past it.
    const __int128 cut =
        static_cast<__int128>(wall) * std::min(own_off[i], own_wall[i]) / own_wall[i];
    s.on_core_ns = wall - static_cast<int64_t>(cut);
  }
}

// The pieces of one rank's host lane, in time order: between every two instants where a span
// starts or ends, the innermost span that covers it says what it is.
// `keyed`: whether to say what work each piece is (for the medians); where pieces are only
// told apart as device or host work, the keys are not built.
std::vector<Segment> segments_of(const Trace& trace, const RankTrace& rank, int work_class,
                                 bool keyed = true) {
  std::vector<const Event*> spans;
  for (const Event& e : rank.events) {
    if (e.lane == kHostLane && e.t1_ns >= e.t0_ns) spans.push_back(&e);
  }
  std::stable_sort(spans.begin(), spans.end(),
                   [](const Event* x, const Event* y) { return x->t0_ns < y->t0_ns; });
  std::vector<std::string> names(spans.size());
  // Each instant's edges: which spans start (true) or end there.
  std::map<int64_t, std::vector<std::pair<size_t, bool>>> edges;
  for (size_t i = 0; i < spans.size(); ++i) {
    const Event& e = *spans[i];
    names[i] = std::string(category_name(e.category)) + ":" + work_name(trace.str(e.name));
    edges[e.t0_ns].push_back({i, true});
    edges[e.t1_ns].push_back({i, false});
  }
  // Communication is issued from inside device work (a gradient bucket's all_reduce from a
  // backward hook): where, is part of what the work is, so an issue bounds a piece too.
  std::map<int64_t, std::string> issues;
  for (const Event& e : rank.events) {
    if (e.lane == kCommLane && e.category == Category::kCollective) {
      issues[e.t0_ns] += "!" + trace.str(e.name);
      edges[e.t0_ns];  // an instant, with no span edges of its own
    }
  }
  // What bounds a piece of span `inner` at an instant: its own start or end, or that of a span
  // inside it ("<forward blocks.0", ">wait send"); spans beside it do not make it other work.
  auto bound = [&](size_t inner, int64_t t, const std::vector<std::pair<size_t, bool>>& at) {
    auto issued = issues.find(t);
    std::string label = issued == issues.end() ? std::string() : issued->second;
    for (const auto& [i, start] : at) {
      const bool inside =
          inner == spans.size() || i == inner ||
          (spans[i]->t0_ns >= spans[inner]->t0_ns && spans[i]->t1_ns <= spans[inner]->t1_ns);
      if (inside) label += (start ? "<" : ">") + (i == inner ? std::string("self") : names[i]);
    }
    return label;
  };
  std::vector<Segment> out;
  std::vector<size_t> active;
  std::map<std::pair<size_t, std::string>, int> seen;  // alike pieces of one span occurrence
  size_t next = 0;
  const std::string cls = std::to_string(work_class) + "|";
  for (auto it = edges.begin(); it != edges.end() && std::next(it) != edges.end(); ++it) {
    const int64_t a = it->first, b = std::next(it)->first;
    while (next < spans.size() && spans[next]->t0_ns <= a) active.push_back(next++);
    active.erase(std::remove_if(active.begin(), active.end(),
                                [&](size_t i) { return spans[i]->t1_ns <= a; }),
                 active.end());
    // The innermost: started last; of those started together, the shortest.
    const size_t none = spans.size();
    size_t inner = none;
    for (size_t i : active) {
      if (inner == none || spans[i]->t0_ns > spans[inner]->t0_ns ||
          (spans[i]->t0_ns == spans[inner]->t0_ns && spans[i]->t1_ns <= spans[inner]->t1_ns))
        inner = i;
    }
    Segment s{a, b, piece_of(trace, inner == none ? nullptr : spans[inner]), "", b - a, inner};
    if (!keyed) {
      out.push_back(std::move(s));
      continue;
    }
    s.key = cls + (inner == none ? std::string("between") : names[inner]) + "|" +
            bound(inner, a, it->second) + "|" + bound(inner, b, std::next(it)->second);
    if (inner != none) s.key += "|" + std::to_string(seen[{inner, s.key}]++);
    out.push_back(std::move(s));
  }
  if (keyed) off_cpu_shares(spans, out);
  return out;
}

int64_t median(std::vector<int64_t> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// The rank's (measured, retimed) instants: its pieces one after another, each at its median.
std::vector<std::pair<int64_t, int64_t>> retimed_anchors(
    const std::vector<Segment>& segments,
    const std::unordered_map<std::string, int64_t>& durations) {
  std::vector<std::pair<int64_t, int64_t>> anchors;
  if (segments.empty()) return anchors;
  int64_t now = segments.front().a;
  anchors.push_back({now, now});
  for (const Segment& s : segments) {
    if (s.kind == Piece::kWait) {
      now += 1;  // keeps what came before and after it apart
    } else if (s.kind != Piece::kTurn) {
      now += durations.at(s.key);
    }
    anchors.push_back({s.b, now});
  }
  return anchors;
}

int64_t through(const std::vector<std::pair<int64_t, int64_t>>& anchors, int64_t t) {
  if (anchors.empty()) return t;
  auto hi = std::lower_bound(anchors.begin(), anchors.end(), t,
                             [](const auto& anchor, int64_t v) { return anchor.first < v; });
  if (hi == anchors.end()) return anchors.back().second + (t - anchors.back().first);
  if (hi->first == t) return hi->second;
  if (hi == anchors.begin()) return hi->second - (hi->first - t);
  const auto& lo = *(hi - 1);
  const double f = double(t - lo.first) / double(hi->first - lo.first);
  return lo.second + static_cast<int64_t>(f * double(hi->second - lo.second));
}

}  // namespace

bool device_work_on_host_lanes(const Trace& trace) {
  for (const RankTrace& rank : trace.ranks) {
    for (const Event& e : rank.events) {
      if (e.category == Category::kKernel || e.category == Category::kMemcpy) return false;
    }
  }
  return true;
}

Trace same_work_same_time(const Trace& measured, const std::vector<int>& work_class) {
  const size_t n = measured.ranks.size();
  std::vector<std::vector<Segment>> segments(n);
  std::unordered_map<std::string, std::vector<int64_t>> samples;
  for (size_t r = 0; r < n; ++r) {
    const int cls = r < work_class.size() ? work_class[r] : -1 - static_cast<int>(r);
    segments[r] = segments_of(measured, measured.ranks[r], cls);
    for (const Segment& s : segments[r]) samples[s.key].push_back(s.on_core_ns);
  }
  std::unordered_map<std::string, int64_t> durations;
  for (auto& [key, lengths] : samples) durations[key] = median(std::move(lengths));

  Trace out = measured;
  for (size_t r = 0; r < n; ++r) {
    const auto anchors = retimed_anchors(segments[r], durations);
    RankTrace& rank = out.ranks[r];
    for (Event& e : rank.events) {
      e.t0_ns = through(anchors, e.t0_ns);
      e.t1_ns = std::max(e.t0_ns, through(anchors, e.t1_ns));
      e.off_cpu_us = 0;  // taken out: the retimed span ran on its core all through
    }
    for (CounterSample& c : rank.counters) c.t_ns = through(anchors, c.t_ns);
  }
  out.normalise();
  return out;
}

std::vector<std::pair<int64_t, int64_t>> device_work_intervals(const Trace& trace,
                                                               const RankTrace& rank) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const Segment& s : segments_of(trace, rank, 0, /*keyed=*/false)) {
    if (s.kind != Piece::kDevice) continue;
    if (!out.empty() && out.back().second == s.a) {
      out.back().second = s.b;
    } else {
      out.push_back({s.a, s.b});
    }
  }
  return out;
}

}  // namespace shardscope::profiling
