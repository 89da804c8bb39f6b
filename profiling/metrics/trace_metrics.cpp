#include "profiling/metrics/trace_metrics.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "profiling/metrics/comm_links.h"
#include "profiling/trace/device_work.h"

namespace shardscope::profiling {
namespace {

int64_t total(const Intervals& disjoint) {
  int64_t sum = 0;
  for (const auto& [a, b] : disjoint) sum += b - a;
  return sum;
}

// Where an event counts toward a rank's compute (less the host's waits inside it) and its
// communication: one definition for a step's figures and a range's.
struct RankIntervals {
  Intervals compute, comm, waits, optimizer, group_comm, peer_wait;
  // `within_a_stage`: a collective of a group inside one pipeline stage
  // (is_collective_within_a_stage).
  void add(const Event& e, bool within_a_stage = false) {
    if (is_compute(e.category)) compute.push_back({e.t0_ns, e.t1_ns});
    if (e.category == Category::kOptimizer) optimizer.push_back({e.t0_ns, e.t1_ns});
    if (within_a_stage) group_comm.push_back({e.t0_ns, e.t1_ns});
    if (is_communication(e.category)) comm.push_back({e.t0_ns, e.t1_ns});
    // A host span that blocked (on a peer, or for its turn on the device) computed nothing
    // meanwhile, though it sits inside a forward or backward span.
    if (e.lane == kHostLane && e.category == Category::kWait) waits.push_back({e.t0_ns, e.t1_ns});
  }
  Intervals computing() const { return difference(merged(compute), merged(waits)); }
  // Communication no compute hides, split: waiting for a peer's call (peer_wait) and the rest.
  std::pair<Intervals, Intervals> exposed(const Intervals& computing, const Intervals& comm) const {
    const Intervals unhidden = difference(comm, computing);
    const Intervals waiting = merged(peer_wait);
    return {difference(unhidden, waiting), difference(unhidden, difference(unhidden, waiting))};
  }
  // What keeps a pipeline stage from idling: its passes, and an optimizer step it runs while
  // later stages still drain (work, not bubble), less its waits; and its collectives within its
  // own group (a tensor group's inside a pass), which it waits on beside its peers, not on
  // another stage. Waiting for another stage (a receive, a collective of the whole world such as
  // the step's loss, or nothing) is bubble.
  Intervals pipeline_busy() const {
    Intervals busy = compute;
    busy.insert(busy.end(), optimizer.begin(), optimizer.end());
    busy = difference(merged(std::move(busy)), merged(waits));
    busy.insert(busy.end(), group_comm.begin(), group_comm.end());
    return merged(std::move(busy));
  }
};

// Per rank and event: when the other end of a send or receive was issued, where that is after
// the event's own start (it waited for its peer); 0 otherwise. In a pipeline (a trace with sends
// and receives), also when the last member of a collective that spans stages arrived (the step's
// loss gathered over the world waits for the last stage's backward): the same wait, and the bubble
// counts it the same way (StepMetrics' pipeline window leaves out only a stage's own group).
std::vector<std::vector<int64_t>> peer_arrivals(const Trace& trace) {
  std::vector<std::vector<int64_t>> arrival(trace.ranks.size());
  for (size_t r = 0; r < trace.ranks.size(); ++r)
    arrival[r].assign(trace.ranks[r].events.size(), 0);
  const std::vector<CommLink> links = link_communication(trace);
  const auto event = [&](uint32_t rank, uint32_t index) -> const Event& {
    return trace.ranks[rank].events[index];
  };
  bool pipeline = false;
  for (const CommLink& link : links) {
    if (!link.point_to_point) continue;
    pipeline = true;
    const Event& a = event(link.from_rank, link.from_event);
    const Event& b = event(link.to_rank, link.to_event);
    if (b.t0_ns > a.t0_ns) arrival[link.from_rank][link.from_event] = b.t0_ns;
    if (a.t0_ns > b.t0_ns) arrival[link.to_rank][link.to_event] = a.t0_ns;
  }
  if (!pipeline) return arrival;
  // A collective is a star from one member: its last arrival over the star's ends.
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<uint32_t, uint32_t>>> stars;
  for (const CommLink& link : links) {
    if (link.point_to_point) continue;
    auto& members = stars[{link.from_rank, link.from_event}];
    if (members.empty()) members.push_back({link.from_rank, link.from_event});
    members.push_back({link.to_rank, link.to_event});
  }
  for (const auto& [centre, members] : stars) {
    if (is_collective_within_a_stage(trace, event(centre.first, centre.second))) continue;
    int64_t last = 0;
    for (const auto& [r, i] : members) last = std::max(last, event(r, i).t0_ns);
    for (const auto& [r, i] : members)
      if (event(r, i).t0_ns < last) arrival[r][i] = last;
  }
  return arrival;
}

void add_peer_wait(RankIntervals& raw, const Event& e, int64_t arrival) {
  if (arrival > e.t0_ns) raw.peer_wait.push_back({e.t0_ns, std::min(e.t1_ns, arrival)});
}

}  // namespace

std::vector<Intervals> peer_waits(const Trace& trace) {
  const auto arrival = peer_arrivals(trace);
  std::vector<Intervals> out;
  for (size_t r = 0; r < trace.ranks.size(); ++r) {
    RankIntervals raw;
    for (size_t i = 0; i < trace.ranks[r].events.size(); ++i)
      add_peer_wait(raw, trace.ranks[r].events[i], arrival[r][i]);
    out.push_back(merged(std::move(raw.peer_wait)));
  }
  return out;
}

bool is_collective_within_a_stage(const Trace& trace, const Event& e) {
  if (!is_communication(e.category)) return false;
  const std::string& name = trace.str(e.name);
  if (name.find("send") != std::string::npos || name.find("recv") != std::string::npos)
    return false;  // a hand-over between stages
  const int world = trace.run.world > 0 ? trace.run.world : int(trace.ranks.size());
  return e.group_size > 1 && e.group_size < world;
}

Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& [a, b] : v) {
    if (b <= a) continue;
    if (!out.empty() && a <= out.back().second) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.push_back({a, b});
    }
  }
  return out;
}

int64_t intersection_length(const Intervals& x, const Intervals& y) {
  int64_t sum = 0;
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const int64_t lo = std::max(x[i].first, y[j].first);
    const int64_t hi = std::min(x[i].second, y[j].second);
    if (lo < hi) sum += hi - lo;
    (x[i].second < y[j].second) ? ++i : ++j;
  }
  return sum;
}

Intervals difference(const Intervals& x, const Intervals& y) {
  Intervals out;
  size_t j = 0;
  for (auto [lo, hi] : x) {
    while (j < y.size() && y[j].second <= lo) ++j;
    for (size_t k = j; k < y.size() && y[k].first < hi; ++k) {
      if (y[k].first > lo) out.emplace_back(lo, y[k].first);
      lo = std::max(lo, y[k].second);
    }
    if (lo < hi) out.emplace_back(lo, hi);
  }
  return out;
}

int64_t union_length(std::vector<std::pair<int64_t, int64_t>> intervals) {
  return total(merged(std::move(intervals)));
}

std::map<int, std::pair<int64_t, int64_t>> pipeline_windows(const Trace& trace) {
  std::map<int, std::pair<int64_t, int64_t>> windows;
  for (const auto& r : trace.ranks) {
    for (const auto& e : r.events) {
      if (e.step < 0 || e.category != Category::kMicroBatch) continue;
      auto [it, fresh] = windows.try_emplace(e.step, e.t0_ns, e.t1_ns);
      if (!fresh) {
        it->second.first = std::min(it->second.first, e.t0_ns);
        it->second.second = std::max(it->second.second, e.t1_ns);
      }
    }
  }
  return windows;
}

std::vector<StepMetrics> step_metrics(const Trace& trace) {
  std::vector<StepMetrics> out;
  const auto windows = pipeline_windows(trace);
  const auto arrival = peer_arrivals(trace);
  for (size_t index = 0; index < trace.ranks.size(); ++index) {
    const RankTrace& r = trace.ranks[index];
    struct Raw : RankIntervals {
      int64_t first = 0, last = 0;
      bool seen = false;
    };
    std::map<int, Raw> steps;
    for (size_t i = 0; i < r.events.size(); ++i) {
      const Event& e = r.events[i];
      if (e.step < 0) continue;
      Raw& raw = steps[e.step];
      if (!raw.seen) {
        raw.first = e.t0_ns;
        raw.last = e.t1_ns;
        raw.seen = true;
      }
      raw.first = std::min(raw.first, e.t0_ns);
      raw.last = std::max(raw.last, e.t1_ns);
      raw.add(e, is_collective_within_a_stage(trace, e));
      add_peer_wait(raw, e, arrival[index][i]);
    }
    for (auto& [step, raw] : steps) {
      const int64_t first = raw.first, last = raw.last;
      const Intervals compute = raw.computing();
      const Intervals comm = merged(raw.comm);
      Intervals both = compute;
      both.insert(both.end(), comm.begin(), comm.end());
      StepMetrics m;
      m.rank = r.rank;
      m.step = step;
      m.span_ns = last - first;
      m.compute_ns = total(compute);
      m.comm_ns = total(comm);
      m.overlap_ns = intersection_length(compute, comm);
      const auto [exposed, waiting] = raw.exposed(compute, comm);
      m.exposed_comm_ns = total(exposed);
      m.peer_wait_ns = total(waiting);
      m.idle_ns = m.span_ns - union_length(both);
      if (auto w = windows.find(step); w != windows.end()) {
        m.micro_span_ns = w->second.second - w->second.first;
        m.micro_compute_ns = intersection_length(raw.pipeline_busy(), Intervals{w->second});
      }
      out.push_back(m);
    }
  }
  return out;
}

std::vector<RangeMetrics> range_metrics(const Trace& trace, int64_t t0_ns, int64_t t1_ns) {
  std::vector<RangeMetrics> out;
  const Intervals range = {{std::min(t0_ns, t1_ns), std::max(t0_ns, t1_ns)}};
  const auto arrival = peer_arrivals(trace);
  for (size_t index = 0; index < trace.ranks.size(); ++index) {
    const RankTrace& r = trace.ranks[index];
    RankIntervals raw;
    for (size_t i = 0; i < r.events.size(); ++i) {
      const Event& e = r.events[i];
      if (e.t1_ns <= range[0].first || e.t0_ns >= range[0].second) continue;
      raw.add(e);
      add_peer_wait(raw, e, arrival[index][i]);
    }
    // Clipped to the range: the parts of each that fall inside it.
    auto clipped = [&](const Intervals& disjoint) {
      return difference(disjoint, difference(disjoint, range));
    };
    const Intervals compute = clipped(raw.computing());
    const Intervals comm = clipped(merged(raw.comm));
    RangeMetrics m;
    m.rank = r.rank;
    m.compute_ns = total(compute);
    m.comm_ns = total(comm);
    const auto [exposed, waiting] = raw.exposed(compute, comm);
    m.exposed_comm_ns = total(exposed);
    m.peer_wait_ns = total(waiting);
    out.push_back(m);
  }
  return out;
}

std::vector<WindowMetrics> window_metrics(const Trace& trace) {
  // Holistic Trace Analysis reads a PyTorch profiler's nanosecond-resolution times with each
  // start rounded up and each end rounded down to the microsecond (its work-around for events
  // that overlap by a rounding error), which takes about a microsecond off every short kernel.
  // Its figures of such files are matched by doing the same; our own export is in whole
  // microseconds already.
  const bool round_as_hta = trace.run.mode == kProfilerMode;
  auto floor_to_us = [](int64_t ns) { return ns - ((ns % 1000) + 1000) % 1000; };
  auto ceil_to_us = [&](int64_t ns) { return -floor_to_us(-ns); };
  std::vector<WindowMetrics> out;
  for (const auto& r : trace.ranks) {
    WindowMetrics m;
    m.rank = r.rank;
    const std::vector<int> steps = measured_steps(trace, r);
    if (!steps.empty()) {
      m.first_step = steps.front();
      m.last_step = steps.back();
    }
    Intervals compute, comm, all;
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (DeviceWork w : device_work(trace, r)) {
      if (round_as_hta) {
        w.t0_ns = ceil_to_us(w.t0_ns);
        w.t1_ns = std::max(w.t0_ns, floor_to_us(w.t1_ns));
      }
      first = std::min(first, w.t0_ns);
      last = std::max(last, w.t1_ns);
      all.push_back({w.t0_ns, w.t1_ns});
      if (w.kind == WorkKind::kCompute) compute.push_back({w.t0_ns, w.t1_ns});
      if (w.kind == WorkKind::kCommunication) comm.push_back({w.t0_ns, w.t1_ns});
    }
    if (first < last) m.kernel_span_ns = last - first;
    compute = merged(std::move(compute));
    comm = merged(std::move(comm));
    m.busy_ns = union_length(std::move(all));
    m.compute_ns = total(compute);
    m.comm_ns = total(comm);
    m.overlap_ns = intersection_length(compute, comm);
    out.push_back(m);
  }
  return out;
}

double busbw_factor(const std::string& op, int n) {
  if (n <= 1) return 0.0;
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op.rfind("all_gather", 0) == 0 || op.rfind("reduce_scatter", 0) == 0) {
    return double(n - 1) / n;
  }
  return 1.0;
}

std::vector<CollectiveMetrics> collective_metrics(const Trace& trace) {
  struct Arrival {
    int rank;
    const Event* event;
  };
  std::map<std::tuple<uint32_t, int64_t, uint32_t>, std::vector<Arrival>> groups;
  for (const auto& r : trace.ranks) {
    for (const auto& e : r.events) {
      if (e.category == Category::kCollective && e.peer < 0 && e.seq >= 0)
        groups[{e.group, e.seq, e.name}].push_back({r.rank, &e});
    }
  }
  // A broadcast root is recorded in `peer`, so broadcasts and reduces are matched here too.
  for (const auto& r : trace.ranks) {
    for (const auto& e : r.events) {
      const std::string& op = trace.str(e.name);
      if (e.category == Category::kCollective && e.peer >= 0 && e.seq >= 0 &&
          (op == "broadcast" || op == "reduce" || op == "gather" || op == "scatter"))
        groups[{e.group, e.seq, e.name}].push_back({r.rank, &e});
    }
  }
  std::vector<CollectiveMetrics> out;
  for (const auto& [key, arrivals] : groups) {
    const Event& first = *arrivals.front().event;
    CollectiveMetrics m;
    m.op = trace.str(first.name);
    m.group = trace.str(first.group);
    m.seq = first.seq;
    m.step = first.step;
    m.ranks = static_cast<int>(arrivals.size());
    const int n = first.group_size > 0 ? first.group_size : m.ranks;
    m.size_bytes = m.op.rfind("all_gather", 0) == 0 ? first.bytes * n : first.bytes;
    int64_t first_arrival = INT64_MAX, last_arrival = INT64_MIN, last_end = INT64_MIN;
    for (const auto& a : arrivals) {
      first_arrival = std::min(first_arrival, a.event->t0_ns);
      if (a.event->t0_ns > last_arrival) {
        last_arrival = a.event->t0_ns;
        m.last_rank = a.rank;
      }
      last_end = std::max(last_end, a.event->t1_ns);
    }
    m.skew_ns = last_arrival - first_arrival;
    m.time_ns = std::max<int64_t>(0, last_end - last_arrival);
    if (m.time_ns > 0) {
      m.algbw_gbps = double(m.size_bytes) / double(m.time_ns);  // bytes per ns = GB/s
      m.busbw_gbps = m.algbw_gbps * busbw_factor(m.op, n);
    }
    out.push_back(m);
  }
  return out;
}

}  // namespace shardscope::profiling
