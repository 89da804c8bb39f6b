#include "app/analysis/data_parallel_step.h"

#include <algorithm>
#include <cmath>
#include <deque>

namespace shardscope::analysis {
namespace {

// Appends an interval to a stream's record; back-to-back intervals of one kind become one.
void append(std::vector<StreamInterval>* stream, StreamInterval::Kind kind, double start,
            double end) {
  if (stream == nullptr || end <= start) return;
  if (!stream->empty() && stream->back().kind == kind && start <= stream->back().end + 1e-12) {
    stream->back().end = std::max(stream->back().end, end);
    return;
  }
  stream->push_back({kind, start, end});
}

// Two streams: the compute stream runs a unit once its gather is done; the communicator's runs
// each collective after the one issued before it, from the moment it is issued. Each records
// what it ran where it is asked to.
struct Streams {
  double compute = 0, comm = 0;
  std::vector<StreamInterval>*compute_record = nullptr, *comm_record = nullptr;
  // A collective of `seconds` issued at `at`: when it finishes. None (0 s: nothing to move, or
  // a unit still held) waits for nothing.
  double issue(double at, double seconds, StreamInterval::Kind kind) {
    if (seconds <= 0) return at;
    const double start = std::max(comm, at);
    comm = start + seconds;
    append(comm_record, kind, start, comm);
    return comm;
  }
  // The compute stream runs `seconds` of `kind` once it and `ready` allow.
  void run(double ready, double seconds, StreamInterval::Kind kind) {
    const double start = std::max(compute, ready);
    compute = start + seconds;
    append(compute_record, kind, start, compute);
  }
};

}  // namespace

UnitPassTime sharded_unit_pass(const std::vector<UnitWork>& units, bool prefetch,
                               StreamTimeline* timeline) {
  UnitPassTime out;
  if (units.empty()) return out;
  const size_t n = units.size();
  Streams s;
  if (timeline != nullptr) s.compute_record = &timeline->compute, s.comm_record = &timeline->comm;
  using K = StreamInterval;
  std::vector<double> gathered(n, 0);
  // Forward: the first unit's gather starts the pass.
  gathered[0] = s.issue(0, units[0].gather_s, K::kGather);
  for (size_t u = 0; u < n; ++u) {
    const double start = std::max(s.compute, gathered[u]);
    if (u + 1 < n && prefetch) gathered[u + 1] = s.issue(start, units[u + 1].gather_s, K::kGather);
    s.run(gathered[u], units[u].forward_s, K::kForward);
    out.compute_s += units[u].forward_s;
    if (u + 1 < n && !prefetch)
      gathered[u + 1] = s.issue(s.compute, units[u + 1].gather_s, K::kGather);
  }
  // Backward, last unit first: forward freed every unit, so each is gathered again.
  gathered[n - 1] = s.issue(s.compute, units[n - 1].regather_s, K::kGather);
  for (size_t u = n; u-- > 0;) {
    const double start = std::max(s.compute, gathered[u]);
    if (u > 0 && prefetch) gathered[u - 1] = s.issue(start, units[u - 1].regather_s, K::kGather);
    s.run(gathered[u], units[u].backward_s, K::kBackward);
    out.compute_s += units[u].backward_s;
    if (units[u].reduce_s > 0) s.issue(s.compute, units[u].reduce_s, K::kReduce);
    if (u > 0 && !prefetch)
      gathered[u - 1] = s.issue(s.compute, units[u - 1].regather_s, K::kGather);
  }
  out.span_s = std::max(s.compute, s.comm);
  return out;
}

std::vector<GradientBucket> plan_gradient_buckets(const std::vector<GradientUnit>& units,
                                                  double cap_bytes, double first_cap_bytes) {
  std::vector<GradientBucket> buckets;
  GradientBucket open;
  for (size_t u = units.size(); u-- > 0;) {
    for (double bytes : units[u].tensor_bytes) {
      open.bytes += bytes;
      open.unit = u;
      const double cap = buckets.empty() ? first_cap_bytes : cap_bytes;
      if (open.bytes >= cap) {
        buckets.push_back(open);
        open = GradientBucket();
      }
    }
  }
  if (open.bytes > 0) buckets.push_back(open);
  return buckets;
}

double gradient_sync_tail(const std::vector<GradientUnit>& units,
                          const std::vector<GradientBucket>& buckets, bool overlap,
                          const std::function<double(double bytes)>& collective_s,
                          int max_in_flight, std::vector<StreamInterval>* comm) {
  double backward = 0;
  for (const GradientUnit& u : units) backward += u.backward_s;
  Streams s;
  s.comm_record = comm;
  std::deque<double> unfinished;  // when each bucket issued and not yet waited for finishes
  size_t next = 0;                // the next bucket to issue
  // Backward runs the units last first; a bucket goes when the unit completing it is done (with
  // overlap), else when backward is.
  const auto issue_ready = [&](size_t done_unit, bool all) {
    for (; next < buckets.size() && (all || buckets[next].unit >= done_unit); ++next) {
      unfinished.push_back(
          s.issue(s.compute, collective_s(buckets[next].bytes), StreamInterval::kReduce));
      for (; max_in_flight > 0 && int(unfinished.size()) > max_in_flight; unfinished.pop_front())
        s.compute = std::max(s.compute, unfinished.front());
    }
  };
  for (size_t u = units.size(); u-- > 0;) {
    s.compute += units[u].backward_s;
    if (overlap) issue_ready(u, false);
  }
  issue_ready(0, true);
  return std::max(s.compute, s.comm) - backward;
}

}  // namespace shardscope::analysis
