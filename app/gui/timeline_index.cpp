#include "app/gui/timeline_index.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <set>

#include "profiling/metrics/step_figures.h"
#include "profiling/trace/pipeline_pass_names.h"

namespace shardscope::gui {

using profiling::Category;
using profiling::Event;
using profiling::MemoryKind;

namespace {

// Greedy row packing: each event goes to the shallowest row whose last event has ended, so a
// span that starts inside another lands below it. Parents come before the children they start
// with (ties by start are broken longest first).
void pack_lane(const profiling::RankTrace& rank, int rank_index, int lane,
               std::vector<uint32_t> ids, std::vector<TimelineRow>* rows) {
  const auto& ev = rank.events;
  std::stable_sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) {
    if (ev[a].t0_ns != ev[b].t0_ns) return ev[a].t0_ns < ev[b].t0_ns;
    return ev[a].t1_ns > ev[b].t1_ns;
  });
  // Rows still busy (by when they end) and rows free again, so finding the shallowest free row
  // costs a logarithm, not a walk down every row: 500,000 overlapping events on one lane once
  // took two minutes to open (each walked the rows of all before it).
  std::vector<TimelineRow> lane_rows;
  using Busy = std::pair<int64_t, size_t>;  // (end, row)
  std::priority_queue<Busy, std::vector<Busy>, std::greater<Busy>> busy;
  std::set<size_t> free_rows;
  for (uint32_t id : ids) {
    while (!busy.empty() && busy.top().first <= ev[id].t0_ns) {
      free_rows.insert(busy.top().second);
      busy.pop();
    }
    size_t depth = lane_rows.size();
    if (!free_rows.empty()) {
      depth = *free_rows.begin();
      free_rows.erase(free_rows.begin());
    } else {
      lane_rows.push_back(TimelineRow{rank_index, lane, static_cast<int>(depth), {}});
    }
    busy.emplace(std::max(ev[id].t1_ns, ev[id].t0_ns), depth);
    lane_rows[depth].events.push_back(id);
  }
  for (auto& r : lane_rows) rows->push_back(std::move(r));
}

std::vector<std::pair<int64_t, int64_t>> memory_over_time(const profiling::RankTrace& rank) {
  std::vector<std::pair<int64_t, int64_t>> allocated, summed;
  int64_t current[profiling::kMemoryKindCount] = {};
  int64_t sum = 0;
  for (const auto& c : rank.counters) {
    if (c.kind == MemoryKind::kAllocated) {
      allocated.emplace_back(c.t_ns, c.bytes);
      continue;
    }
    const int k = static_cast<int>(c.kind);
    sum += c.bytes - current[k];
    current[k] = c.bytes;
    summed.emplace_back(c.t_ns, sum);
  }
  return allocated.empty() ? summed : allocated;
}

}  // namespace

TimelineIndex build_timeline_index(const profiling::Trace& trace) {
  TimelineIndex index;
  std::map<int, StepSpan> step_spans;
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  // A send or receive waiting for its neighbour stage is the bubble, not exposed communication.
  const std::vector<profiling::Intervals> peer_waits = profiling::peer_waits(trace);
  for (size_t r = 0; r < trace.ranks.size(); ++r) {
    const auto& rank = trace.ranks[r];
    std::map<int, std::vector<uint32_t>> by_lane;
    profiling::Intervals compute, comm, waits;
    int ordinal = 0;
    for (uint32_t i = 0; i < rank.events.size(); ++i) {
      const Event& e = rank.events[i];
      by_lane[e.lane].push_back(i);
      if (profiling::is_compute(e.category)) compute.emplace_back(e.t0_ns, e.t1_ns);
      if (profiling::is_communication(e.category)) comm.emplace_back(e.t0_ns, e.t1_ns);
      // A host blocked inside a forward or backward hides nothing (as step_metrics counts it).
      if (e.lane == profiling::kHostLane && e.category == Category::kWait)
        waits.emplace_back(e.t0_ns, e.t1_ns);
      lo = std::min(lo, e.t0_ns);
      hi = std::max(hi, e.t1_ns);
      if (e.category == Category::kStep) {
        // Foreign traces may not number their steps: count them on each rank.
        const int number = e.step >= 0 ? e.step : ordinal;
        ++ordinal;
        auto [it, fresh] = step_spans.try_emplace(number, StepSpan{number, e.t0_ns, e.t1_ns});
        if (!fresh) {
          it->second.t0_ns = std::min(it->second.t0_ns, e.t0_ns);
          it->second.t1_ns = std::max(it->second.t1_ns, e.t1_ns);
        }
      }
    }
    const profiling::Intervals busy = profiling::difference(profiling::merged(std::move(compute)),
                                                            profiling::merged(std::move(waits)));
    index.rank_failed.push_back(!rank.failure.empty());
    index.exposed_comm.push_back(profiling::difference(
        profiling::difference(profiling::merged(std::move(comm)), busy), peer_waits[r]));
    for (auto& [lane, ids] : by_lane) pack_lane(rank, static_cast<int>(r), lane, ids, &index.rows);
    index.memory.push_back(memory_over_time(rank));
    int64_t peak = 0;
    for (const auto& [t, bytes] : index.memory.back()) {
      peak = std::max(peak, bytes);
      lo = std::min(lo, t);
      hi = std::max(hi, t);
    }
    index.memory_peak.push_back(peak);
  }
  for (const auto& [number, span] : step_spans) index.steps.push_back(span);
  // Figures per rank and step, in one place with `report` (profiling/metrics/step_figures.h).
  index.step_figures.resize(trace.ranks.size());
  std::map<int, size_t> rank_index;
  for (size_t r = 0; r < trace.ranks.size(); ++r) rank_index[trace.ranks[r].rank] = r;
  for (const auto& m : profiling::step_metrics(trace)) {
    if (auto it = rank_index.find(m.rank); it != rank_index.end())
      index.step_figures[it->second].push_back(m);
  }
  index.pipeline_idle = profiling::pipeline_idle(trace);
  index.weight_pass_names.resize(trace.strings.size());
  index.pass_labels.resize(trace.strings.size());
  for (size_t id = 0; id < trace.strings.size(); ++id) {
    index.pass_labels[id] = profiling::pass_label(trace.strings[id]);
    index.weight_pass_names[id] =
        profiling::is_pass_span(trace.strings[id], profiling::kWeightPassSpan);
    index.has_weight_passes = index.has_weight_passes || index.weight_pass_names[id];
  }
  if (lo > hi) lo = hi = 0;
  index.t_min = lo;
  index.t_max = std::max(hi, lo + 1);
  return index;
}

void layout_row(const profiling::RankTrace& rank, const TimelineRow& row, const TimeWindow& window,
                double width_px, double fold_px, std::vector<TimelineMark>* out) {
  out->clear();
  const auto& ev = rank.events;
  const auto& ids = row.events;
  const int64_t t_lo = window.t0_ns, t_hi = window.t_of(width_px);
  // Rows never overlap, so ends are sorted like starts: the first visible event is the first
  // that ends after the left edge.
  auto it = std::partition_point(ids.begin(), ids.end(),
                                 [&](uint32_t id) { return ev[id].t1_ns <= t_lo; });
  const auto end =
      std::partition_point(it, ids.end(), [&](uint32_t id) { return ev[id].t0_ns < t_hi; });
  while (it != end) {
    const Event& e = ev[*it];
    const double x0 = window.x_of(e.t0_ns), x1 = window.x_of(e.t1_ns);
    if (x1 - x0 >= fold_px) {
      out->push_back({x0, x1, *it, 1});
      ++it;
      continue;
    }
    // A fold: the small events that end within a fold width of where it has reached (ends are
    // sorted too, so one binary search jumps over them; a wide event that starts inside ends
    // later and is left for a mark of its own), for as long as the next event is small too.
    TimelineMark fold{x0, x1, *it, 0};
    auto first = it;
    for (;;) {
      const double from = std::max(fold.x1, window.x_of(ev[*it].t0_ns));
      const int64_t limit = window.t_of(from + fold_px);
      auto next = std::partition_point(it, end, [&](uint32_t id) { return ev[id].t1_ns < limit; });
      fold.x1 = std::max(fold.x1, window.x_of(ev[*(next - 1)].t1_ns));
      it = next;
      if (it == end) break;
      const Event& n = ev[*it];
      const double nx0 = window.x_of(n.t0_ns), nx1 = window.x_of(n.t1_ns);
      if (nx1 - nx0 >= fold_px || nx0 - fold.x1 > 1.0) break;
    }
    fold.count = static_cast<uint32_t>(it - first);
    out->push_back(fold);
  }
}

void layout_memory(const std::vector<std::pair<int64_t, int64_t>>& samples,
                   const TimeWindow& window, double width_px, std::vector<float>* bytes_per_px) {
  const int columns = std::max(0, static_cast<int>(width_px));
  bytes_per_px->assign(columns, -1.0f);
  if (samples.empty() || columns == 0) return;
  // Held bytes are a step function: the value at a column's start is the last sample before it.
  auto it = std::partition_point(samples.begin(), samples.end(),
                                 [&](const auto& s) { return s.first <= window.t0_ns; });
  int64_t held = it == samples.begin() ? -1 : std::prev(it)->second;
  for (int x = 0; x < columns; ++x) {
    const int64_t t_end = window.t_of(x + 1);
    int64_t most = held;
    auto next =
        std::partition_point(it, samples.end(), [&](const auto& s) { return s.first < t_end; });
    // Dense columns: the maximum over the column's samples (few per column when zoomed in; the
    // strip has one column per pixel, so the total work is bounded by the samples on screen).
    for (auto s = it; s != next; ++s) most = std::max(most, s->second);
    if (next != it) held = std::prev(next)->second;
    it = next;
    (*bytes_per_px)[x] = static_cast<float>(most);
  }
}

}  // namespace shardscope::gui
