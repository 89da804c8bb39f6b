#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/gui/event_ref.h"
#include "app/gui/timeline_index.h"
#include "app/gui/timeline_search.h"
#include "profiling/trace/trace.h"

struct ImDrawList;

namespace shardscope::gui {

// The per-rank timeline: a group of rows per rank (host lane, communication lane, device
// streams, memory strip), zoomed with the wheel around the cursor, panned by dragging, a range
// measured by dragging with the right button, events hovered and selected. A selected collective
// is linked to the same collective on every other rank. Communication not hidden behind compute
// is underlined in red.
class TimelineView {
 public:
  // Fills the rest of the current ImGui window. `root_failure`: the rank whose failure stopped the
  // run (red); other failed ranks stopped because of it (amber).
  void draw(const profiling::Trace& trace, const TimelineIndex& index, int root_failure = -1);
  void reset();
  void request_fit_all() { pending_fit_ = kFitAll; }
  // `step`: the step's own number (the nearest there is).
  void request_fit_step(int step) {
    pending_fit_ = kFitStep;
    fit_step_ = step;
  }
  // Milliseconds from the trace's first event.
  void request_range(double t0_ms, double t1_ms) {
    pending_fit_ = kFitRange;
    range_ms_[0] = t0_ms;
    range_ms_[1] = t1_ms;
  }
  // The measured range (what a right-drag marks), in milliseconds from the trace's first event.
  void request_measure(double t0_ms, double t1_ms) {
    measure_requested_ = true;
    measure_ms_[0] = t0_ms;
    measure_ms_[1] = t1_ms;
  }
  void select(const profiling::Trace& trace, EventRef ref);
  // A pipeline run's (p - 1) / (m + p - 1): its bubble is shaded and given next to this; < 0
  // for a run without pipeline stages.
  void set_bubble_formula(double formula) { bubble_formula_ = formula; }
  // A live run: its last step is still being recorded.
  void set_live(bool live) { live_ = live; }
  // Rank bands a person folds to one row (a click on the rank's name) or pins on top
  // (Shift+click; again to unpin), by index into Trace::ranks: many ranks stay readable.
  void toggle_folded(int rank_index);
  void toggle_pinned(int rank_index);
  std::string search;

  // The k-th event named `name` on rank `rank` (by start), or an invalid ref.
  static EventRef find_event(const profiling::Trace& trace, int rank, const std::string& name,
                             int k);
  // Where `ref` was drawn in the last frame (its centre, screen pixels); false when off screen.
  bool screen_position(const TimelineIndex& index, EventRef ref, float* x, float* y) const;

  // What a test inspects: the visible range, hovered and selected events with their details,
  // the linked ranks, what the last frame drew.
  nlohmann::json state(const profiling::Trace& trace, const TimelineIndex& index) const;
  static nlohmann::json describe(const profiling::Trace& trace, const TimelineIndex& index,
                                 EventRef ref);

 private:
  enum Fit { kNone, kFitAll, kFitStep, kFitRange };
  struct Frame;
  struct RankBand;
  void apply_fit(const TimelineIndex& index, double width_px);
  // The parts of draw(), in the order it calls them: above the canvas, then the canvas from the
  // back to the front, then what the mouse is over.
  void draw_toolbar(const profiling::Trace& trace, const TimelineIndex& index);
  // The search field and its matches; Ctrl+F focuses it, Enter in it and N / P outside it go to
  // the next or previous match, which is selected and centred.
  void draw_search(const profiling::Trace& trace);
  void go_to_match(const profiling::Trace& trace, bool forward);
  void draw_legend(const TimelineIndex& index) const;
  void draw_selection_line(const profiling::Trace& trace, const TimelineIndex& index) const;
  // What the selection line says of the selected event and its peers.
  std::string selection_text(const profiling::Trace& trace, const TimelineIndex& index) const;
  Frame begin_canvas(const profiling::Trace& trace, const TimelineIndex& index);
  void handle_canvas_input(const Frame& f);
  // W/S zoom around the middle, A/D pan, F fits all, Escape clears the selection, N / P the next
  // and previous search match, Ctrl+F the search field: keys work while the timeline's window
  // has focus and no text field takes them.
  void handle_keys(const profiling::Trace& trace, const Frame& f);
  // Zooming out stops at the whole trace and a margin, and panning keeps some of it in view.
  void keep_trace_in_view(const TimelineIndex& index, double width_px);
  void draw_time_axis(const Frame& f, const TimelineIndex& index);
  float draw_ranks(const Frame& f, const profiling::Trace& trace, const TimelineIndex& index,
                   int root_failure);
  // The order bands are drawn in (the pinned rank first), and the rows they take, folded ones
  // counting one (timeline_rank_bands.cpp).
  std::vector<size_t> rank_order(size_t ranks) const;
  float layout_units(const TimelineIndex& index, size_t ranks) const;
  // A folded rank's one row: its rows all point there, so links and the selection still land.
  void draw_folded(const Frame& f, const TimelineIndex& index, RankBand* band);
  // A click on a rank's name folds it, Shift+click pins it.
  void handle_rank_label_click(const Frame& f, const RankBand& band);
  void draw_lanes(const Frame& f, const profiling::Trace& trace, const TimelineIndex& index,
                  RankBand* band, std::vector<TimelineMark>* marks);
  void draw_marks(const Frame& f, const profiling::Trace& trace, const TimelineIndex& index,
                  const RankBand& band, const std::vector<TimelineMark>& marks);
  void draw_exposed_comm(const Frame& f, const profiling::Intervals& exposed, float y) const;
  void draw_step_figures(const Frame& f, const TimelineIndex& index, RankBand* band);
  void draw_rank_memory(const Frame& f, const profiling::Trace& trace, const TimelineIndex& index,
                        int64_t memory_scale, RankBand* band) const;
  void draw_failure(const Frame& f, const profiling::RankTrace& rank, const RankBand& band,
                    bool root) const;
  void draw_selection_and_links(const Frame& f, const profiling::Trace& trace,
                                const TimelineIndex& index, float bottom) const;
  void draw_hover(const Frame& f, const profiling::Trace& trace, const TimelineIndex& index);
  int row_of(const profiling::Trace& trace, const TimelineIndex& index, EventRef ref) const;

  TimeWindow window_;
  double width_px_ = 0;
  Fit pending_fit_ = kFitAll;
  int fit_step_ = 0;
  double range_ms_[2] = {0, 0};
  EventRef hovered_, selected_;
  // The selection's peers: a collective on every rank of its group, or a send and its receive
  // (point-to-point, drawn as an arrow from the send to the receive).
  std::vector<EventRef> linked_;
  bool linked_point_to_point_ = false;
  bool measuring_ = false;
  int64_t measure_[2] = {0, 0};
  bool measure_requested_ = false;
  double measure_ms_[2] = {0, 0};
  // Each rank's compute, communication and exposed communication in the measured range,
  // recomputed when the range changes (timeline_range.cpp).
  std::vector<profiling::RangeMetrics> range_totals_;
  int64_t totals_of_[2] = {0, 0};
  void update_range_totals(const profiling::Trace& trace, const TimelineIndex& index);
  void draw_range_totals(ImDrawList* dl, const profiling::Trace& trace, const TimelineIndex& index,
                         float x) const;
  // Geometry of the last frame, for script targets and the state.
  float canvas_x_ = 0;
  std::vector<float> row_top_;
  float row_height_ = 0;
  float lane_label_x_ = 60;  // lane names, right of the rank's name
  int drawn_marks_ = 0, folded_marks_ = 0, drawn_step_marks_ = 0;
  double bubble_formula_ = -1;
  bool live_ = false;
  std::set<int> folded_;  // by index into Trace::ranks
  int pinned_ = -1;
  profiling::StepMetrics hovered_figures_;
  bool hovered_figures_valid_ = false;
  bool hovered_figures_failed_ = false;  // the step its rank failed in
  const profiling::Trace* last_trace_ = nullptr;
  SearchMatches matches_;
  bool focus_search_ = false;
};

}  // namespace shardscope::gui
