#include "profiling/projection/trace_replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "profiling/projection/collective_model.h"
#include "profiling/projection/device_model.h"

namespace shardscope::profiling {
namespace {

constexpr double kUnknown = -1;

// One communication call of one rank.
struct Op {
  size_t event = 0;           // index into the rank's events (comm lane)
  int64_t issue_m = 0;        // measured issue time
  int64_t wait_begin_m = -1;  // measured wait, if the host waited on it
  int64_t wait_end_m = -1;
  std::string name;
  std::string cost_op;  // what the cost model prices it as
  int64_t bytes = 0;    // nccl-tests' S for the cost model
  int ranks = 1;        // that take part: the group, or the two ends of a send
  // Which other ops it pairs with: collectives by (group, seq); a send by (group, from, to, seq),
  // matched by the receive with the same key.
  std::tuple<uint32_t, int64_t, int, int> key;
  // Ops of one rank on one stream (a group's collectives; sends to, or receives from, one peer)
  // run one after another.
  std::pair<uint32_t, int> stream;
  double issue = kUnknown, complete = kUnknown;  // projected, seconds
};

// The cost model's op for a recorded op, and the whole-buffer size it expects.
std::pair<std::string, int64_t> model_op(const std::string& op, int64_t bytes, int n) {
  if (op == "all_gather" || op == "all_gather_into") return {"all_gather_into", bytes * n};
  if (op == "gather") return {"broadcast", bytes * n};
  if (op == "scatter") return {"broadcast", bytes * n};
  if (op == "barrier") return {"all_reduce", 4};
  if (op == "recv") return {"send", bytes};
  return {op, bytes};
}

struct Point {
  enum Kind { kIssue, kWait, kSkip };  // at equal times an issue comes before its wait
  int64_t t_m;
  Kind kind;
  size_t op;          // kIssue, kWait
  int64_t end_m = 0;  // kSkip: the host waited for a turn on a shared device until then
};

// "wait OP" -> OP, as string ids.
std::map<uint32_t, uint32_t> wait_names_to_ops(const Trace& measured) {
  std::map<uint32_t, uint32_t> wait_to_op;
  std::map<std::string, uint32_t> ids;
  for (uint32_t s = 0; s < measured.strings.size(); ++s) ids[measured.strings[s]] = s;
  for (const auto& [text, id] : ids) {
    if (text.rfind("wait ", 0) != 0) continue;
    auto op = ids.find(text.substr(5));
    if (op != ids.end()) wait_to_op[id] = op->second;
  }
  return wait_to_op;
}

// The op of the communication event `i` of `rank`.
Op make_op(const Trace& measured, const RankTrace& rank, size_t i) {
  const Event& e = rank.events[i];
  Op op;
  op.event = i;
  op.issue_m = e.t0_ns;
  op.name = measured.str(e.name);
  const bool p2p = op.name == "send" || op.name == "recv";
  const int me = rank.rank;
  if (p2p) {
    const int from = op.name == "send" ? me : e.peer, to = op.name == "send" ? e.peer : me;
    op.key = {e.group, e.seq, from, to};
    // Sends and receives travel independently (Gloo's async sends, NCCL's p2p streams).
    op.stream = {e.group, 2 * e.peer + (op.name == "send" ? 1 : 0)};
  } else {
    op.key = {e.group, e.seq, -1, -1};
    op.stream = {e.group, -1};
  }
  op.ranks = p2p ? 2 : std::max<int>(1, e.group_size);
  std::tie(op.cost_op, op.bytes) = model_op(op.name, e.bytes, op.ranks);
  return op;
}

// One rank's communication ops, the instants its host issued, waited on or skipped them in
// measured order, and its earliest measured event.
struct RankOps {
  std::vector<Op> ops;
  std::vector<Point> points;
  int64_t origin = std::numeric_limits<int64_t>::max();
};

RankOps read_rank_ops(const Trace& measured, const RankTrace& rank,
                      const std::map<uint32_t, uint32_t>& wait_to_op) {
  RankOps out;
  std::map<std::tuple<uint32_t, int64_t, uint32_t, int16_t>, size_t> by_identity;
  for (size_t i = 0; i < rank.events.size(); ++i) {
    const Event& e = rank.events[i];
    out.origin = std::min(out.origin, e.t0_ns);
    if (e.category != Category::kCollective) continue;
    by_identity[{e.group, e.seq, e.name, e.peer}] = out.ops.size();
    out.ops.push_back(make_op(measured, rank, i));
  }
  // The host's waits, matched to their calls ("wait OP" carries the call's group and seq).
  for (const Event& e : rank.events) {
    if (e.category != Category::kWait) continue;
    auto op_name = wait_to_op.find(e.name);
    if (op_name == wait_to_op.end()) continue;
    auto found = by_identity.find({e.group, e.seq, op_name->second, e.peer});
    if (found == by_identity.end()) continue;
    Op& op = out.ops[found->second];
    op.wait_begin_m = e.t0_ns;
    op.wait_end_m = e.t1_ns;
  }
  for (size_t i = 0; i < out.ops.size(); ++i) {
    out.points.push_back({out.ops[i].issue_m, Point::kIssue, i});
    if (out.ops[i].wait_begin_m >= 0)
      out.points.push_back({out.ops[i].wait_begin_m, Point::kWait, i});
  }
  // Waiting for a turn on a shared device takes no time on a device of one's own.
  for (const Event& e : rank.events) {
    if (e.category == Category::kWait && measured.str(e.name) == kDeviceTurnWaitName)
      out.points.push_back({e.t0_ns, Point::kSkip, 0, e.t1_ns});
  }
  std::stable_sort(out.points.begin(), out.points.end(), [](const Point& a, const Point& b) {
    return std::tie(a.t_m, a.kind) < std::tie(b.t_m, b.kind);
  });
  if (out.origin == std::numeric_limits<int64_t>::max()) out.origin = 0;
  return out;
}

// The schedule being projected: every rank's ops, the streams they run on, and its host clock.
struct Replay {
  Replay(const HardwareProfile& hw, const ReplayOptions& options)
      : hw(hw),
        scale(options.compute_scale),
        ahead(options.device_ahead_of_host),
        span_scales(options.span_scales) {}

  const HardwareProfile& hw;
  double scale;
  bool ahead;
  const std::vector<std::vector<ScaledSpan>>& span_scales;
  std::vector<std::vector<Op>> ops;
  std::vector<std::vector<Point>> points;
  // Every op with the same key, on every rank.
  std::map<std::tuple<uint32_t, int64_t, int, int>, std::vector<std::pair<size_t, size_t>>> members;
  // Per rank and stream, its ops in issue order, and how far they have completed.
  std::vector<std::map<std::pair<uint32_t, int>, std::vector<size_t>>> streams;
  std::vector<std::map<std::pair<uint32_t, int>, size_t>> stream_next;
  std::vector<std::map<std::pair<uint32_t, int>, double>> stream_free;
  // Host clocks: measured cursor and projected time, and the (measured, projected) anchors that
  // map the rest of the rank's events afterwards.
  std::vector<size_t> next_point;
  std::vector<int64_t> cursor;
  std::vector<double> host;
  // With the device ahead of its host: where each rank's device work lies (measured), the next
  // of it, and when the device is free (projected).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> device_work;
  std::vector<size_t> next_work;
  std::vector<double> device;
  std::vector<std::vector<std::pair<int64_t, double>>> anchors;

  // Indexes the ops (read into `ops` and `points`) and starts every host clock at `t0`.
  void start(int64_t t0) {
    const size_t n_ranks = ops.size();
    for (size_t r = 0; r < n_ranks; ++r) {
      for (size_t i = 0; i < ops[r].size(); ++i) members[ops[r][i].key].push_back({r, i});
    }
    streams.resize(n_ranks);
    stream_next.resize(n_ranks);
    stream_free.resize(n_ranks);
    for (size_t r = 0; r < n_ranks; ++r) {
      for (size_t i = 0; i < ops[r].size(); ++i) streams[r][ops[r][i].stream].push_back(i);
    }
    next_point.assign(n_ranks, 0);
    cursor.assign(n_ranks, t0);
    host.assign(n_ranks, 0.0);
    device.assign(n_ranks, 0.0);
    next_work.assign(n_ranks, 0);
    device_work.resize(n_ranks);
    anchors.assign(n_ranks, {});
    for (size_t r = 0; r < n_ranks; ++r) anchors[r].push_back({t0, 0.0});
  }

  // Projected seconds of rank `r`'s measured compute from `from` to `to`: compute_scale, or
  // inside a scaled span its own scale.
  double projected_length(size_t r, int64_t from, int64_t to) const {
    if (to <= from) return 0;
    if (r >= span_scales.size() || span_scales[r].empty()) return (to - from) * 1e-9 * scale;
    const auto& spans = span_scales[r];
    auto it = std::lower_bound(spans.begin(), spans.end(), from,
                               [](const ScaledSpan& s, int64_t t) { return s.t1_ns <= t; });
    double seconds = 0;
    int64_t at = from;
    for (; at < to && it != spans.end() && it->t0_ns < to; ++it) {
      if (it->t0_ns > at) seconds += (it->t0_ns - at) * 1e-9 * scale;
      const int64_t inner_from = std::max(at, it->t0_ns), inner_to = std::min(to, it->t1_ns);
      if (inner_to > inner_from) seconds += (inner_to - inner_from) * 1e-9 * it->scale;
      at = std::max(at, inner_to);
    }
    if (to > at) seconds += (to - at) * 1e-9 * scale;
    return seconds;
  }

  // Where rank `r` is: its host, or its device when that is behind with work the host issued.
  double now(size_t r) const { return std::max(host[r], device[r]); }

  void advance_to(size_t r, int64_t t_m) {
    if (t_m <= cursor[r]) return;
    if (!ahead) {
      host[r] += projected_length(r, cursor[r], t_m);
      cursor[r] = t_m;
      anchors[r].push_back({t_m, host[r]});
      return;
    }
    const auto& work = device_work[r];
    size_t& k = next_work[r];
    while (cursor[r] < t_m) {
      while (k < work.size() && work[k].second <= cursor[r]) ++k;
      const bool on_device = k < work.size() && work[k].first <= cursor[r];
      const int64_t end = on_device ? std::min(t_m, work[k].second)
                                    : (k < work.size() ? std::min(t_m, work[k].first) : t_m);
      const double length = projected_length(r, cursor[r], end);
      if (on_device) {
        device[r] = now(r) + length;  // issued now, queued behind the device's earlier work
      } else {
        host[r] += length;
      }
      cursor[r] = end;
      anchors[r].push_back({end, now(r)});
    }
  }

  // An op can complete once every member issued it and is next on its own stream.
  bool try_complete(size_t r, size_t i) {
    Op& op = ops[r][i];
    if (op.complete != kUnknown) return false;
    const auto& group = members[op.key];
    if (group.size() < static_cast<size_t>(op.ranks)) return false;
    double start = 0;
    for (const auto& [mr, mi] : group) {
      const Op& m = ops[mr][mi];
      if (m.issue == kUnknown) return false;
      const auto& stream = streams[mr][m.stream];
      const size_t next = stream_next[mr][m.stream];
      if (next >= stream.size() || stream[next] != mi) return false;
      start = std::max({start, m.issue, stream_free[mr][m.stream]});
    }
    const double duration =
        op.ranks <= 1 ? 0.0 : estimate_collective(op.cost_op, op.bytes, op.ranks, hw).time_s;
    for (const auto& [mr, mi] : group) {
      Op& m = ops[mr][mi];
      m.complete = start + duration;
      stream_free[mr][m.stream] = m.complete;
      ++stream_next[mr][m.stream];
    }
    return true;
  }

  // Moves rank `r`'s host through its points until it waits on an op that cannot complete yet.
  // Returns whether it passed any point.
  bool advance_host(size_t r) {
    bool progress = false;
    while (next_point[r] < points[r].size()) {
      const Point& p = points[r][next_point[r]];
      if (p.kind == Point::kSkip) {
        advance_to(r, p.t_m);
        cursor[r] = std::max(cursor[r], p.end_m);
        anchors[r].push_back({cursor[r], now(r)});
      } else if (p.kind == Point::kIssue) {
        advance_to(r, p.t_m);
        ops[r][p.op].issue = now(r);  // after the device work it follows
      } else {
        Op& op = ops[r][p.op];
        advance_to(r, p.t_m);
        if (op.complete == kUnknown && !try_complete(r, p.op)) break;  // stalled on others
        double& waiting = ahead ? device[r] : host[r];
        waiting = std::max(waiting, op.complete);
        cursor[r] = std::max(cursor[r], op.wait_end_m);
        anchors[r].push_back({cursor[r], now(r)});
      }
      ++next_point[r];
      progress = true;
    }
    return progress;
  }

  // Asynchronous ops complete in the background, each stream in order. Returns whether any did.
  bool complete_in_background(size_t r) {
    bool progress = false;
    for (auto& [id, stream] : streams[r]) {
      for (size_t& next = stream_next[r][id]; next < stream.size();) {
        if (!try_complete(r, stream[next])) break;  // advances `next` when it completes
        progress = true;
      }
    }
    return progress;
  }

  // Runs every rank as far as it goes.
  void run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t r = 0; r < ops.size(); ++r) {
        if (advance_host(r)) progress = true;
        if (complete_in_background(r)) progress = true;
      }
    }
  }

  void throw_if_stalled(const Trace& measured) const {
    for (size_t r = 0; r < ops.size(); ++r) {
      if (next_point[r] < points[r].size()) {
        const Op& op = ops[r][points[r][next_point[r]].op];  // only waits stall
        throw std::runtime_error("replay stalled: rank " + std::to_string(measured.ranks[r].rank) +
                                 " waits on " + op.name + " that not every member of its group " +
                                 "issued");
      }
    }
  }
};

// The projected time of measured instant `t_m` through a rank's (measured, projected) anchors.
// A measured instant where the host waited zero time has two projected instants, before and
// after the (projected) wait: `late` picks the one after.
int64_t project_time(const std::vector<std::pair<int64_t, double>>& a, double scale, int64_t t_m,
                     bool late = true) {
  auto it = late ? std::upper_bound(a.begin(), a.end(), t_m,
                                    [](int64_t t, const auto& anchor) { return t < anchor.first; })
                 : std::lower_bound(a.begin(), a.end(), t_m,
                                    [](const auto& anchor, int64_t t) { return anchor.first < t; });
  if (!late && it != a.end() && it->first == t_m) return static_cast<int64_t>(it->second * 1e9);
  double h;
  if (it == a.begin()) {
    h = a.front().second - (a.front().first - t_m) * 1e-9 * scale;
  } else if (it == a.end()) {
    h = a.back().second + (t_m - a.back().first) * 1e-9 * scale;
  } else {
    const auto& lo = *(it - 1);
    const auto& hi = *it;
    const double f = hi.first == lo.first ? 0.0 : double(t_m - lo.first) / (hi.first - lo.first);
    h = lo.second + f * (hi.second - lo.second);
  }
  return static_cast<int64_t>(h * 1e9);
}

// Moves the events and counters of `rank` (a copy of measured rank `r`) to their projected times.
void project_rank(const Trace& measured, const Replay& replay, size_t r, RankTrace& rank) {
  const auto& a = replay.anchors[r];
  const double scale = replay.scale;
  for (auto& e : rank.events) {
    if (e.category == Category::kCollective) continue;
    // Work starts after a wait that ends at the same instant and ends before one that starts
    // there; a wait is the other way round.
    const bool wait = e.category == Category::kWait;
    e.t0_ns = project_time(a, scale, e.t0_ns, !wait);
    e.t1_ns = std::max(e.t0_ns, project_time(a, scale, e.t1_ns, wait));
    // A turn on the shared device takes no time on a device of one's own, even where it was
    // taken inside a wait for a peer (whose projected length the interpolation would share).
    if (wait && measured.str(e.name) == kDeviceTurnWaitName) e.t1_ns = e.t0_ns;
  }
  for (const Op& op : replay.ops[r]) {
    Event& e = rank.events[op.event];
    e.t0_ns = static_cast<int64_t>(op.issue * 1e9);
    e.t1_ns = static_cast<int64_t>(std::max(op.issue, op.complete) * 1e9);
  }
  for (auto& c : rank.counters) c.t_ns = project_time(a, scale, c.t_ns);
}

}  // namespace

Trace replay_trace(const Trace& measured, const HardwareProfile& hw, const ReplayOptions& options) {
  const size_t n_ranks = measured.ranks.size();
  if (n_ranks == 0)
    throw std::runtime_error("the trace holds no ranks: there is nothing to replay");
  // Ranks whose events lie in no step (only metadata, or every step number cut): a projection of
  // nothing once printed a step of 0.00 ms, exit 0.
  const bool any_step =
      std::any_of(measured.ranks.begin(), measured.ranks.end(), [](const auto& r) {
        return std::any_of(r.events.begin(), r.events.end(),
                           [](const Event& e) { return e.step >= 0; });
      });
  if (!any_step)
    throw std::runtime_error(
        "the trace holds no training step (no event lies in one): there is "
        "nothing to replay");
  if (static_cast<int>(n_ranks) > hw.gpus())
    throw std::runtime_error(std::to_string(n_ranks) + " ranks do not fit on " + hw.label() +
                             ", which has " + std::to_string(hw.gpus()) + " GPUs");
  const double scale = options.compute_scale;
  if (!(scale > 0)) throw std::runtime_error("compute scale must be positive");
  for (const auto& spans : options.span_scales) {
    for (size_t i = 0; i < spans.size(); ++i) {
      if (!(spans[i].scale > 0) || !std::isfinite(spans[i].scale) ||
          spans[i].t1_ns < spans[i].t0_ns || (i > 0 && spans[i].t0_ns < spans[i - 1].t1_ns))
        throw std::runtime_error("span scales must be positive, finite, sorted and disjoint");
    }
  }

  const std::map<uint32_t, uint32_t> wait_to_op = wait_names_to_ops(measured);
  Replay replay(hw, options);
  std::vector<int64_t> origin(n_ranks);
  for (size_t r = 0; r < n_ranks; ++r) {
    RankOps rank = read_rank_ops(measured, measured.ranks[r], wait_to_op);
    replay.ops.push_back(std::move(rank.ops));
    replay.points.push_back(std::move(rank.points));
    origin[r] = rank.origin;
  }
  // All ranks start together: the earliest measured event of any rank is projected time 0.
  const int64_t t0 = *std::min_element(origin.begin(), origin.end());
  replay.start(t0);
  if (options.device_ahead_of_host) {
    for (size_t r = 0; r < n_ranks; ++r)
      replay.device_work[r] = device_work_intervals(measured, measured.ranks[r]);
  }
  replay.run();
  replay.throw_if_stalled(measured);
  // The rest of each rank, after its last communication: its device work still queues.
  for (size_t r = 0; r < n_ranks; ++r) {
    int64_t last = replay.cursor[r];
    for (const Event& e : measured.ranks[r].events) last = std::max(last, e.t1_ns);
    replay.advance_to(r, last);
  }

  // The projected trace: host-side times through each rank's anchors, communication at its
  // projected issue and completion.
  Trace out = measured;
  out.run.projected = RecordedProjection{hw.name, scale};
  for (size_t r = 0; r < n_ranks; ++r) {
    project_rank(measured, replay, r, out.ranks[r]);
    // The target's times: no thread of it was preempted.
    for (Event& e : out.ranks[r].events) e.off_cpu_us = 0;
  }
  out.normalise();
  return out;
}

}  // namespace shardscope::profiling
