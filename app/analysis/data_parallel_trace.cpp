#include "app/analysis/data_parallel_trace.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace shardscope::analysis {
namespace {

// Events of rank 0, in seconds from the step's start.
class Drawing {
 public:
  Drawing(profiling::Trace& trace, int ranks) : t_(trace), ranks_(ranks) {}

  profiling::Event& add(const std::string& name, profiling::Category category, double t0, double t1,
                        int micro) {
    return add_projected_span(t_, 0, name, category, t0, t1, micro);
  }
  // A collective of the data-parallel group on the comm lane.
  void collective(const std::string& name, double t0, double t1, int micro) {
    profiling::Event& e = add(name, profiling::Category::kCollective, t0, t1, micro);
    e.lane = profiling::kCommLane;
    e.group = t_.intern("dp");
    e.group_size = int16_t(std::min(ranks_, 32767));
  }

 private:
  profiling::Trace& t_;
  int ranks_;
};

// A pass as long as it ran: where a collective beside it slowed it, its name says so.
std::string pass_name(bool forward, int micro, const StreamInterval& i) {
  const bool slowed = slowed_seconds({i}) > 0;  // as shared_gpu_streams tells them apart
  return (forward ? "forward " : "backward ") + std::to_string(micro) +
         (slowed ? ", slowed beside the collectives" : "");
}

const char* collective_name(StreamInterval::Kind kind) {
  return kind == StreamInterval::kGather ? "all_gather" : "reduce_scatter";
}

// ZeRO-3: every micro-batch runs the same two streams; where the compute stream is idle inside
// a pass it waits for a collective.
double draw_unit_passes(Drawing& d, const DataParallelStep& s, const StreamTimeline& pass,
                        double at) {
  double span = 0;
  for (const auto& i : pass.compute) span = std::max(span, i.end);
  for (const auto& i : pass.comm) span = std::max(span, i.end);
  for (int k = 0; k < s.micro_batches; ++k) {
    if (k == 0 && s.weight_casts_s > 0) {
      d.add("weight casts", profiling::Category::kForward, at, at + s.weight_casts_s, 0);
      at += s.weight_casts_s;
    }
    double idle_from = at;
    for (const auto& i : pass.compute) {
      const bool forward = i.kind == StreamInterval::kForward;
      if (at + i.start > idle_from)
        d.add("wait all_gather", profiling::Category::kWait, idle_from, at + i.start, k);
      d.add(pass_name(forward, k, i),
            forward ? profiling::Category::kForward : profiling::Category::kBackward, at + i.start,
            at + i.end, k);
      idle_from = at + i.end;
    }
    if (at + span > idle_from)
      d.add("wait reduce_scatter", profiling::Category::kWait, idle_from, at + span, k);
    for (const auto& i : pass.comm)
      d.collective(collective_name(i.kind), at + i.start, at + i.end, k);
    at += span;
  }
  return at;
}

// DDP and ZeRO-1/2: forward and backward of each micro-batch; the last one's backward sends its
// buckets as they fill.
double draw_replicated_passes(Drawing& d, const DataParallelStep& s, const DataParallelTimeline& t,
                              double at) {
  for (int k = 0; k < s.micro_batches; ++k) {
    const double casts = k == 0 ? s.weight_casts_s : 0;
    if (casts > 0) d.add("weight casts", profiling::Category::kForward, at, at + casts, k);
    d.add("forward " + std::to_string(k), profiling::Category::kForward, at + casts,
          at + casts + s.forward_s, k);
    const double backward = at + casts + s.forward_s;
    at = backward + s.backward_s;
    if (k + 1 < s.micro_batches || t.sync.compute.empty()) {
      d.add("backward " + std::to_string(k), profiling::Category::kBackward, backward, at, k);
      continue;
    }
    // The last backward as it ran beside its buckets: slowed where they ran beside it, stalled
    // where it waited for one (ZeRO-2's two in flight); then what ran past its end.
    double idle_from = backward;
    for (const auto& i : t.sync.compute) {
      if (backward + i.start > idle_from + 1e-12)
        d.add("wait " + t.sync_op, profiling::Category::kWait, idle_from, backward + i.start, k);
      d.add(pass_name(false, k, i), profiling::Category::kBackward, backward + i.start,
            backward + i.end, k);
      idle_from = backward + i.end;
    }
    for (const auto& i : t.sync.comm)
      d.collective(t.sync_op, backward + i.start, backward + i.end, k);
    const double end = at + t.tail_s;
    if (end > idle_from + 1e-12)
      d.add(t.tail_name, profiling::Category::kGradSync, idle_from, end, k);
    at = end;
  }
  return at;
}

}  // namespace

profiling::Event& add_projected_span(profiling::Trace& trace, int rank, const std::string& name,
                                     profiling::Category category, double t0, double t1,
                                     int micro) {
  profiling::Event e;
  e.t0_ns = int64_t(std::llround(t0 * 1e9));
  e.t1_ns = std::max(int64_t(std::llround(t1 * 1e9)), e.t0_ns + 1);
  e.name = trace.intern(name);
  e.category = category;
  e.step = 0;
  e.micro = int16_t(std::min(micro, 32767));
  trace.ranks[rank].events.push_back(e);
  return trace.ranks[rank].events.back();
}

void add_data_parallel_step(profiling::Trace& trace, const DataParallelStep& s,
                            const DataParallelTimeline& timeline) {
  Drawing d(trace, s.ranks);
  double at = timeline.units ? draw_unit_passes(d, s, timeline.pass, 0)
                             : draw_replicated_passes(d, s, timeline, 0);
  d.add("optimizer", profiling::Category::kOptimizer, at, at + s.optimizer_s, -1);
  at += s.optimizer_s;
  if (timeline.after_step_s > 0) {
    d.add("send the stepped parameters", profiling::Category::kGradSync, at,
          at + timeline.after_step_s, -1);
    d.collective(timeline.after_step_op, at, at + timeline.after_step_s, -1);
    at += timeline.after_step_s;
  }
  d.add("step 0", profiling::Category::kStep, 0, at, -1);
}

}  // namespace shardscope::analysis
