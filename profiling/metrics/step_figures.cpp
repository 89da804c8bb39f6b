#include "profiling/metrics/step_figures.h"

#include "profiling/trace/device_work.h"

#include <algorithm>
#include <map>

namespace shardscope::profiling {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

RunFigures run_figures(const std::vector<StepMetrics>& steps, bool skip_first) {
  std::map<int, std::vector<const StepMetrics*>> by_rank;
  for (const auto& m : steps) by_rank[m.rank].push_back(&m);
  RunFigures run;
  for (auto& [rank, list] : by_rank) {
    std::sort(list.begin(), list.end(),
              [](const StepMetrics* a, const StepMetrics* b) { return a->step < b->step; });
    if (skip_first && list.size() > 1) list.erase(list.begin());
    std::vector<double> span, exposed, peer_wait, overlap, bubble;
    for (const StepMetrics* m : list) {
      span.push_back(m->span_ns * 1e-9);
      exposed.push_back(m->exposed_comm_ns * 1e-9);
      peer_wait.push_back(m->peer_wait_ns * 1e-9);
      overlap.push_back(m->overlap_fraction());
      bubble.push_back(m->bubble_fraction());
    }
    RankFigures f;
    f.rank = rank;
    f.steps = static_cast<int>(list.size());
    f.step_s = median(span);
    f.exposed_comm_s = median(exposed);
    f.peer_wait_s = median(peer_wait);
    f.overlap = median(overlap);
    f.bubble_fraction = median(bubble);
    run.step_s = std::max(run.step_s, f.step_s);
    run.ranks.push_back(f);
  }
  return run;
}

RunFigures run_figures(const Trace& trace) {
  return run_figures(step_metrics(trace), first_step_is_warm_up(trace));
}

std::vector<Intervals> pipeline_idle(const Trace& trace) {
  const auto windows = pipeline_windows(trace);
  std::vector<Intervals> out;
  for (const auto& r : trace.ranks) {
    Intervals compute, waits, window, group_comm;
    for (const auto& e : r.events) {
      if (e.step < 0) continue;
      // A group's collective (a tensor group's inside a pass) keeps a stage busy, as in
      // step_metrics; only sends and receives, or nothing, are waits on another stage.
      if (is_collective_within_a_stage(trace, e)) group_comm.emplace_back(e.t0_ns, e.t1_ns);
      // A stage's optimizer step while later stages drain is work, not bubble (step_metrics).
      if (is_compute(e.category) || e.category == Category::kOptimizer)
        compute.emplace_back(e.t0_ns, e.t1_ns);
      // As step_metrics counts it: a host blocked inside a forward or backward computes nothing.
      if (e.lane == kHostLane && e.category == Category::kWait)
        waits.emplace_back(e.t0_ns, e.t1_ns);
    }
    for (const auto& [step, w] : windows) window.push_back(w);
    Intervals busy = difference(merged(std::move(compute)), merged(std::move(waits)));
    busy.insert(busy.end(), group_comm.begin(), group_comm.end());
    out.push_back(difference(merged(std::move(window)), merged(std::move(busy))));
  }
  return out;
}

}  // namespace shardscope::profiling
