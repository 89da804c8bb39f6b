#pragma once

#include <memory>

#include "app/gui/timeline_index.h"
#include "app/gui/timeline_view.h"
#include "profiling/trace/trace.h"

namespace shardscope::perf {

// Builds timeline frames of a trace the way the app does, with a headless ImGui context (no
// window, no GPU): what is measured is the CPU time to lay out and record one frame's draw lists.
class TimelineFrames {
 public:
  explicit TimelineFrames(const profiling::Trace& trace, int width = 1600, int height = 900);
  ~TimelineFrames();
  TimelineFrames(const TimelineFrames&) = delete;
  TimelineFrames& operator=(const TimelineFrames&) = delete;

  // One frame showing `fraction` of the trace (1: all of it), starting 40 % in.
  void draw(double fraction);
  const gui::TimelineIndex& index() const { return index_; }
  const gui::TimelineView& view() const { return view_; }
  int vertices() const { return vertices_; }

 private:
  const profiling::Trace& trace_;
  gui::TimelineIndex index_;
  gui::TimelineView view_;
  int width_, height_, vertices_ = 0;
  void* context_ = nullptr;
};

}  // namespace shardscope::perf
