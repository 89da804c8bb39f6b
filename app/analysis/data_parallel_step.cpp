#include "app/analysis/data_parallel_step.h"

#include <algorithm>
#include <cmath>

namespace shardscope::analysis {
namespace {

// Two streams: the compute stream runs a unit once its gather is done; the communicator's runs
// each collective after the one issued before it, from the moment it is issued.
struct Streams {
  double compute = 0, comm = 0;
  StreamTimeline* timeline = nullptr;
  std::vector<StreamInterval>* comm_record = nullptr;
  // A collective of `seconds` issued at `at`: when it finishes.
  double issue(double at, double seconds, StreamInterval::Kind kind) {
    const double start = std::max(comm, at);
    comm = start + seconds;
    if (comm_record != nullptr) timeline_add(*comm_record, kind, start, comm);
    return comm;
  }
  // The compute stream runs `seconds` of `kind` once it and `ready` allow.
  void run(double ready, double seconds, StreamInterval::Kind kind) {
    const double start = std::max(compute, ready);
    compute = start + seconds;
    if (timeline != nullptr) timeline->add(timeline->compute, kind, start, compute);
  }
  static void timeline_add(std::vector<StreamInterval>& stream, StreamInterval::Kind kind,
                           double start, double end) {
    if (end <= start) return;
    if (!stream.empty() && stream.back().kind == kind && start <= stream.back().end + 1e-12) {
      stream.back().end = std::max(stream.back().end, end);
      return;
    }
    stream.push_back({kind, start, end});
  }
};

}  // namespace

void StreamTimeline::add(std::vector<StreamInterval>& stream, StreamInterval::Kind kind,
                         double start, double end) {
  Streams::timeline_add(stream, kind, start, end);
}

UnitPassTime sharded_unit_pass(const std::vector<UnitWork>& units, bool prefetch,
                               StreamTimeline* timeline) {
  UnitPassTime out;
  if (units.empty()) return out;
  const size_t n = units.size();
  Streams s;
  s.timeline = timeline;
  if (timeline != nullptr) s.comm_record = &timeline->comm;
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
  gathered[n - 1] = s.issue(s.compute, units[n - 1].gather_s, K::kGather);
  for (size_t u = n; u-- > 0;) {
    const double start = std::max(s.compute, gathered[u]);
    if (u > 0 && prefetch) gathered[u - 1] = s.issue(start, units[u - 1].gather_s, K::kGather);
    s.run(gathered[u], units[u].backward_s, K::kBackward);
    out.compute_s += units[u].backward_s;
    if (units[u].reduce_s > 0) s.issue(s.compute, units[u].reduce_s, K::kReduce);
    if (u > 0 && !prefetch) gathered[u - 1] = s.issue(s.compute, units[u - 1].gather_s, K::kGather);
  }
  out.span_s = std::max(s.compute, s.comm);
  return out;
}

double gradient_sync_tail(const std::vector<GradientUnit>& units, double cap_bytes, bool overlap,
                          const std::function<double(double bytes)>& collective_s,
                          std::vector<StreamInterval>* comm) {
  double backward = 0;
  for (const GradientUnit& u : units) backward += u.backward_s;
  const double full_bucket = cap_bytes > 0 ? collective_s(cap_bytes) : 0;
  Streams s;
  s.comm_record = comm;
  const auto reduce = StreamInterval::kReduce;
  double open = 0;  // bytes in the bucket being filled
  for (size_t u = units.size(); u-- > 0;) {
    s.compute += units[u].backward_s;
    const double at = overlap ? s.compute : backward;
    if (units[u].bytes <= 0) continue;
    if (cap_bytes <= 0) {
      const int n = std::max(1, units[u].tensors);
      for (int k = 0; k < n; ++k) s.issue(at, collective_s(units[u].bytes / n), reduce);
      continue;
    }
    open += units[u].bytes;
    const double full = std::floor(open / cap_bytes);
    if (full > 0)
      s.issue(at, full * full_bucket, reduce);  // issued together, run one after another
    open -= full * cap_bytes;
  }
  if (open > 0) s.issue(backward, collective_s(open), reduce);
  return std::max(0.0, s.comm - backward);
}

double in_buckets(double bytes, double cap_bytes,
                  const std::function<double(double bytes)>& collective_s) {
  if (bytes <= 0) return 0;
  if (cap_bytes <= 0 || bytes <= cap_bytes) return collective_s(bytes);
  const double full = std::floor(bytes / cap_bytes), rest = bytes - full * cap_bytes;
  return full * collective_s(cap_bytes) + (rest > 0 ? collective_s(rest) : 0);
}

}  // namespace shardscope::analysis
