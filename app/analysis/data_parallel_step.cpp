#include "app/analysis/data_parallel_step.h"

#include <algorithm>
#include <cmath>
#include <deque>

namespace shardscope::analysis {
UnitPassTime sharded_unit_pass(const std::vector<UnitWork>& units, bool prefetch,
                               StreamTimeline* timeline, const GpuSharing& sharing) {
  UnitPassTime out;
  if (units.empty()) return out;
  const size_t n = units.size();
  SharedGpuStreams s;
  using K = StreamInterval;
  // Each unit's gather (-1: none to wait for) and the compute task that ran last.
  std::vector<int> gathered(n, -1);
  // Forward: the first unit's gather starts the pass; with prefetch, the next unit's gather is
  // issued as a unit starts computing, else when it is done.
  gathered[0] = s.collective(units[0].gather_s, K::kGather);
  int last = -1;
  for (size_t u = 0; u < n; ++u) {
    last = s.compute(units[u].forward_s, K::kForward, gathered[u], units[u].forward_busy);
    if (u + 1 < n)
      gathered[u + 1] = s.collective(units[u + 1].gather_s, K::kGather, last, !prefetch);
  }
  // Backward, last unit first: forward freed every unit, so each is gathered again; a unit's
  // reduce-scatter goes when its backward is done (ahead of the next gather without prefetch).
  gathered[n - 1] = s.collective(units[n - 1].regather_s, K::kGather, last, true);
  for (size_t u = n; u-- > 0;) {
    last = s.compute(units[u].backward_s, K::kBackward, gathered[u], units[u].backward_busy);
    if (u > 0 && prefetch)
      gathered[u - 1] = s.collective(units[u - 1].regather_s, K::kGather, last);
    s.collective(units[u].reduce_s, K::kReduce, last, true);
    if (u > 0 && !prefetch)
      gathered[u - 1] = s.collective(units[u - 1].regather_s, K::kGather, last, true);
  }
  const SharedGpuStreams::Result r = s.run(sharing, timeline);
  out.compute_s = r.compute_alone_s;
  out.span_s = std::max(r.compute_end, r.comm_end);
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
                          int max_in_flight, StreamTimeline* timeline, const GpuSharing& sharing) {
  SharedGpuStreams s;
  std::deque<int> unfinished;  // the buckets issued and not yet waited for
  size_t next = 0;             // the next bucket to issue
  int last = -1;               // the compute task that ran last
  // Backward runs the units last first; a bucket goes when the unit completing it is done (with
  // overlap), else when backward is. Past `max_in_flight` unfinished, backward waits for the
  // oldest.
  const auto issue_ready = [&](size_t done_unit, bool all) {
    for (; next < buckets.size() && (all || buckets[next].unit >= done_unit); ++next) {
      const int j =
          s.collective(collective_s(buckets[next].bytes), StreamInterval::kReduce, last, true);
      if (j >= 0) unfinished.push_back(j);
      for (; max_in_flight > 0 && int(unfinished.size()) > max_in_flight; unfinished.pop_front())
        last = s.compute(0, StreamInterval::kBackward, unfinished.front());
    }
  };
  for (size_t u = units.size(); u-- > 0;) {
    last = s.compute(units[u].backward_s, StreamInterval::kBackward, -1, units[u].busy);
    if (overlap) issue_ready(u, false);
  }
  issue_ready(0, true);
  const SharedGpuStreams::Result r = s.run(sharing, timeline);
  return std::max(r.compute_end, r.comm_end) - r.compute_alone_s;
}

}  // namespace shardscope::analysis
