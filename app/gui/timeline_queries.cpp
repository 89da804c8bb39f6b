#include "app/gui/timeline_view.h"

#include <algorithm>
#include <cmath>

#include "app/gui/timeline_figures.h"
#include "profiling/metrics/trace_metrics.h"

// What scripts and tests ask of the timeline: events by name, their place on screen, the
// selection and its linked collectives, and the view's state as JSON.
namespace shardscope::gui {

using profiling::Category;
using profiling::Event;
using profiling::Trace;

EventRef TimelineView::find_event(const Trace& trace, int rank, const std::string& name, int k) {
  if (rank < 0 || rank >= static_cast<int>(trace.ranks.size())) return {};
  std::vector<uint32_t> hits;
  const auto& ev = trace.ranks[rank].events;
  for (uint32_t i = 0; i < ev.size(); ++i) {
    if (trace.str(ev[i].name) == name) hits.push_back(i);
  }
  std::stable_sort(hits.begin(), hits.end(),
                   [&](uint32_t a, uint32_t b) { return ev[a].t0_ns < ev[b].t0_ns; });
  if (k < 0 || k >= static_cast<int>(hits.size())) return {};
  return EventRef{rank, hits[k], 1};
}

namespace {

// A send's receive, or a receive's send: the other end's op on its peer, same group, with the
// same per-direction sequence number.
std::vector<EventRef> point_to_point_pair(const Trace& trace, EventRef ref) {
  const Event& e = trace.ranks[ref.rank].events[ref.event];
  const bool send = trace.str(e.name) == "send";
  const int me = trace.ranks[ref.rank].rank;
  for (size_t r = 0; r < trace.ranks.size(); ++r) {
    if (trace.ranks[r].rank != e.peer) continue;
    const auto& ev = trace.ranks[r].events;
    for (uint32_t i = 0; i < ev.size(); ++i) {
      if (ev[i].category == Category::kCollective && ev[i].seq == e.seq && ev[i].peer == me &&
          ev[i].group == e.group && trace.str(ev[i].name) == (send ? "recv" : "send")) {
        const EventRef other{static_cast<int>(r), i, 1};
        return send ? std::vector<EventRef>{ref, other} : std::vector<EventRef>{other, ref};
      }
    }
  }
  return {};
}

}  // namespace

void TimelineView::select(const Trace& trace, EventRef ref) {
  selected_ = ref;
  linked_.clear();
  linked_point_to_point_ = false;
  if (!ref.valid()) return;
  const Event& e = trace.ranks[ref.rank].events[ref.event];
  if (e.seq < 0 || e.category != Category::kCollective) return;
  const std::string& group = trace.str(e.group);
  const std::string& op = trace.str(e.name);
  if (op == "send" || op == "recv") {
    linked_ = point_to_point_pair(trace, ref);
    linked_point_to_point_ = true;
    return;
  }
  // The same collective on every rank: same group, sequence number and op.
  for (size_t r = 0; r < trace.ranks.size(); ++r) {
    const auto& ev = trace.ranks[r].events;
    for (uint32_t i = 0; i < ev.size(); ++i) {
      if (ev[i].seq == e.seq && ev[i].category == Category::kCollective &&
          trace.str(ev[i].group) == group && trace.str(ev[i].name) == op) {
        linked_.push_back(EventRef{static_cast<int>(r), i, 1});
      }
    }
  }
}

int TimelineView::row_of(const Trace& trace, const TimelineIndex& index, EventRef ref) const {
  const Event& e = trace.ranks[ref.rank].events[ref.event];
  const auto& ev = trace.ranks[ref.rank].events;
  for (size_t r = 0; r < index.rows.size(); ++r) {
    const auto& row = index.rows[r];
    if (row.rank != ref.rank || row.lane != e.lane) continue;
    auto it = std::lower_bound(row.events.begin(), row.events.end(), e.t0_ns,
                               [&](uint32_t id, int64_t t) { return ev[id].t0_ns < t; });
    for (; it != row.events.end() && ev[*it].t0_ns == e.t0_ns; ++it) {
      if (*it == ref.event) return static_cast<int>(r);
    }
  }
  return -1;
}

bool TimelineView::screen_position(const TimelineIndex& index, EventRef ref, float* x,
                                   float* y) const {
  if (!ref.valid() || row_top_.empty() || last_trace_ == nullptr) return false;
  const int row = row_of(*last_trace_, index, ref);
  if (row < 0) return false;
  const Event& e = last_trace_->ranks[ref.rank].events[ref.event];
  const double x0 = std::max(0.0, window_.x_of(e.t0_ns));
  const double x1 = std::min(width_px_, window_.x_of(e.t1_ns));
  if (x1 < 0 || x0 > width_px_) return false;
  *x = canvas_x_ + static_cast<float>((x0 + x1) / 2);
  *y = row_top_[row] + row_height_ / 2;
  return true;
}

nlohmann::json TimelineView::describe(const Trace& trace, const TimelineIndex& index,
                                      EventRef ref) {
  if (!ref.valid()) return nullptr;
  const auto& rank = trace.ranks[ref.rank];
  const Event& e = rank.events[ref.event];
  nlohmann::json d = {
      {"name", trace.str(e.name)},
      {"rank", rank.rank},
      {"lane", e.lane < rank.lanes.size() ? rank.lanes[e.lane] : std::to_string(e.lane)},
      {"category", profiling::category_name(e.category)},
      {"start_ms", (e.t0_ns - index.t_min) * 1e-6},
      {"duration_ms", (e.t1_ns - e.t0_ns) * 1e-6},
      {"step", e.step}};
  if (ref.folded > 1) d["folded"] = ref.folded;
  // Recorded on a busy machine: how much of the span its thread spent off its core, which
  // device time leaves out (profiling/projection/device_model.h).
  if (e.off_cpu_us > 0) d["off_core_ms"] = e.off_cpu_us * 1e-3;
  if (e.category == Category::kMemcpy && e.bytes > 0) {
    // A copy's size and speed: a device-to-device copy at a tenth of the HBM's rate, or one from
    // pageable memory, is what stalls a step.
    d["copied_bytes"] = e.bytes;
    const double seconds = (e.t1_ns - e.t0_ns) * 1e-9;
    if (seconds > 0) d["copy_gbps"] = e.bytes / seconds / 1e9;
  }
  if (e.category == Category::kCollective) {
    d["bytes"] = e.bytes;
    d["group"] = trace.str(e.group);
    d["seq"] = e.seq;
    const double seconds = (e.t1_ns - e.t0_ns) * 1e-9;
    if (seconds > 0 && e.group_size > 0) {
      const double algbw = e.bytes / seconds / 1e9;
      d["busbw_gbps"] = algbw * profiling::busbw_factor(trace.str(e.name), e.group_size);
    }
  }
  return d;
}

nlohmann::json TimelineView::state(const Trace& trace, const TimelineIndex& index) const {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : linked_) links.push_back(trace.ranks[l.rank].rank);
  nlohmann::json s = {
      {"visible_ms",
       {(window_.t0_ns - index.t_min) * 1e-6, (window_.t_of(width_px_) - index.t_min) * 1e-6}},
      {"hovered", describe(trace, index, hovered_)},
      {"selected", describe(trace, index, selected_)},
      {"linked_ranks", links},
      {"linked", linked_point_to_point_ ? "point-to-point" : "collective"},
      {"selection_text", selection_text(trace, index)},
      {"drawn_marks", drawn_marks_},
      {"drawn_step_marks", drawn_step_marks_},
      {"fit_step", fit_step_},
      {"ns_per_px", window_.ns_per_px},
      {"folded_marks", folded_marks_},
      {"rows", index.rows.size()},
      {"rank_order",
       [&] {
         nlohmann::json order = nlohmann::json::array();
         for (size_t r : rank_order(trace.ranks.size())) order.push_back(trace.ranks[r].rank);
         return order;
       }()},
      {"rank_top_px",
       [&] {  // where each rank's band began on the last frame, by rank
         nlohmann::json tops = nlohmann::json::object();
         for (size_t r = 0; r < index.rows.size() && r < row_top_.size(); ++r) {
           const std::string rank = std::to_string(trace.ranks[index.rows[r].rank].rank);
           if (!tops.contains(rank)) tops[rank] = row_top_[r];
         }
         return tops;
       }()},
      {"step_figures",
       [&] {  // per rank, each step's figures as the row below its lanes says them
         nlohmann::json all = nlohmann::json::array();
         for (size_t r = 0; r < index.step_figures.size(); ++r) {
           const auto& figures = index.step_figures[r];
           const bool failed = r < index.rank_failed.size() && index.rank_failed[r];
           nlohmann::json rank = nlohmann::json::array();
           for (const auto& m : figures) {
             rank.push_back(step_figures_text(m, bubble_formula_, false, false,
                                              failed && m.step == figures.back().step));
           }
           all.push_back(rank);
         }
         return all;
       }()},
      {"folded_ranks",
       [&] {
         nlohmann::json folded = nlohmann::json::array();
         for (int r : folded_) folded.push_back(trace.ranks[r].rank);
         return folded;
       }()},
      {"search", search},
      {"search_matches", matches_.count()},
      {"search_at", matches_.position(selected_)}};
  if (measure_[1] != measure_[0]) {
    s["measured_ms"] = std::fabs(double(measure_[1] - measure_[0])) * 1e-6;
    nlohmann::json totals = nlohmann::json::array();
    for (const auto& m : range_totals_) {
      totals.push_back({{"rank", m.rank},
                        {"compute_ms", m.compute_ns * 1e-6},
                        {"comm_ms", m.comm_ns * 1e-6},
                        {"exposed_ms", m.exposed_comm_ns * 1e-6},
                        {"peer_wait_ms", m.peer_wait_ns * 1e-6}});
    }
    s["range_totals"] = totals;
  }
  return s;
}

}  // namespace shardscope::gui
