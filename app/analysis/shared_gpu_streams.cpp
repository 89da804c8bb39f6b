#include "app/analysis/shared_gpu_streams.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace shardscope::analysis {
namespace {

// Appends an interval to a stream's record; back-to-back intervals of one kind become one, unless
// either was slowed (each then shows where its own slowdown was).
void append(std::vector<StreamInterval>* stream, StreamInterval::Kind kind, double start,
            double end, double alone) {
  if (stream == nullptr || end <= start) return;
  if (!stream->empty() && stream->back().kind == kind && start <= stream->back().end + 1e-12 &&
      slowed_seconds({{kind, start, end, alone}, stream->back()}) == 0) {
    stream->back().end = std::max(stream->back().end, end);
    stream->back().alone_s += alone;
    return;
  }
  stream->push_back({kind, start, end, alone});
}

// One stream as it runs: the next task, and what is left of the one running.
struct Lane {
  size_t next = 0;
  bool busy = false;
  double left = 0, started = 0;
};

}  // namespace

double slowed_seconds(const std::vector<StreamInterval>& intervals) {
  double seconds = 0;
  for (const StreamInterval& i : intervals) {
    const double excess = i.end - i.start - i.alone_s;
    if (excess > 1e-9 * i.alone_s + 1e-15) seconds += excess;  // more than the sums' rounding
  }
  return seconds;
}

int SharedGpuStreams::compute(double seconds, StreamInterval::Kind kind, int after, double busy) {
  if (!std::isfinite(seconds) || std::isnan(busy) || after < -1 || after >= int(comm_.size()))
    throw std::logic_error(
        "shared GPU streams: a compute task of no finite time, or waiting for a "
        "collective not yet added");
  compute_.push_back({std::max(seconds, 0.0), kind, after, false, busy});
  return int(compute_.size()) - 1;
}

int SharedGpuStreams::collective(double seconds, StreamInterval::Kind kind, int by, bool at_end) {
  if (by < -1 || by >= int(compute_.size()) || (by == -1 && at_end) || std::isnan(seconds) ||
      std::isinf(seconds))
    throw std::logic_error(
        "shared GPU streams: a collective of no finite time, or issued by a task not yet added");
  if (!(seconds > 0)) return -1;
  comm_.push_back({seconds, kind, by, at_end});
  return int(comm_.size()) - 1;
}

SharedGpuStreams::Result SharedGpuStreams::run(const GpuSharing& sharing,
                                               StreamTimeline* timeline) const {
  // While both run: the compute's kernels slowed to compute_rate, which the host's pace hides
  // while they fit in it; the collective slowed while those kernels run.
  const auto pace = [](double rate) {
    return std::isfinite(rate) ? std::clamp(rate, 1e-9, 1.0) : 1.0;
  };
  const double kernel_rate = pace(sharing.compute_rate);
  const double collective_rate = pace(sharing.collective_rate);
  // The paces of the compute task `t` and the collective while both run.
  const auto paces_beside = [&](const Task& t) {
    const double busy = pace(t.busy);
    return std::pair{std::min(1.0, kernel_rate / busy),
                     1 - std::min(1.0, busy / kernel_rate) * (1 - collective_rate)};
  };
  Result out;
  for (const Task& t : compute_) out.compute_alone_s += t.seconds;
  // When each collective was issued (-1: not yet) and whether it is done; which collectives
  // each compute task issues as it starts and as it ends (index 0: those issued at the start).
  std::vector<double> issued(comm_.size(), -1);
  std::vector<char> done(comm_.size(), 0);
  std::vector<std::vector<size_t>> issues_at_start(compute_.size() + 1),
      issues_at_end(compute_.size() + 1);
  for (size_t j = 0; j < comm_.size(); ++j)
    (comm_[j].at_end ? issues_at_end : issues_at_start)[size_t(comm_[j].link + 1)].push_back(j);
  const auto issue = [&](int by, bool at_end, double at) {
    for (size_t j : (at_end ? issues_at_end : issues_at_start)[size_t(by + 1)]) issued[j] = at;
  };
  issue(-1, false, 0);
  Lane c, m;
  double now = 0;
  const auto finish_compute = [&]() {
    const Task& t = compute_[c.next];
    if (timeline != nullptr) append(&timeline->compute, t.kind, c.started, now, t.seconds);
    out.compute_end = now;
    c.busy = false;
    issue(int(c.next++), true, now);
  };
  const auto finish_comm = [&]() {
    if (timeline != nullptr)
      append(&timeline->comm, comm_[m.next].kind, m.started, now, comm_[m.next].seconds);
    out.comm_end = now;
    done[m.next++] = 1;
    m.busy = false;
  };
  for (;;) {
    // Start whatever may start now; a compute task of no work ends as it starts.
    for (bool started = true; started;) {
      started = false;
      if (!c.busy && c.next < compute_.size() &&
          (compute_[c.next].link < 0 || done[size_t(compute_[c.next].link)])) {
        c.started = now, c.left = compute_[c.next].seconds, c.busy = true, started = true;
        issue(int(c.next), false, now);
        if (c.left <= 0) finish_compute();
      }
      if (!m.busy && m.next < comm_.size() && issued[m.next] >= 0) {
        m.started = now, m.left = comm_[m.next].seconds, m.busy = true, started = true;
      }
    }
    if (!c.busy && !m.busy) break;
    const auto [c_rate, m_rate] =
        c.busy && m.busy ? paces_beside(compute_[c.next]) : std::pair{1.0, 1.0};
    const double inf = std::numeric_limits<double>::infinity();
    const double c_dt = c.busy ? c.left / c_rate : inf, m_dt = m.busy ? m.left / m_rate : inf;
    const double dt = std::min(c_dt, m_dt);
    now += dt;
    // The one that ends first ends exactly (so every turn ends a task); the other too if rounding
    // left it nothing.
    if (c.busy) c.left = c_dt == dt ? 0 : c.left - dt * c_rate;
    if (m.busy) m.left = m_dt == dt ? 0 : m.left - dt * m_rate;
    if (c.busy && c.left <= 1e-15) finish_compute();
    if (m.busy && m.left <= 1e-15) finish_comm();
  }
  if (c.next < compute_.size() || m.next < comm_.size())
    throw std::logic_error("shared GPU streams: a task waits for a collective never issued");
  return out;
}

}  // namespace shardscope::analysis
