#pragma once

#include <string>
#include <vector>

#include "app/gui/event_ref.h"
#include "profiling/trace/trace.h"

namespace shardscope::gui {

// The events whose names hold the search text, every rank's, in time order: what N and P step
// through and the toolbar counts ("3 of 17").
class SearchMatches {
 public:
  // Finds the matches again only when the text or the trace changed.
  void update(const profiling::Trace& trace, const std::string& text);
  size_t count() const { return matches_.size(); }
  // The match after (`forward`) or before `from` in time, wrapping around; the first (or last)
  // when `from` is no match. Invalid when there is none.
  EventRef step(EventRef from, bool forward) const;
  // 1 for the first match, 0 for an event that is none.
  size_t position(EventRef ref) const;

 private:
  const profiling::Trace* trace_ = nullptr;
  size_t events_ = 0;
  std::string text_;
  std::vector<EventRef> matches_;
  std::vector<int64_t> starts_;
};

}  // namespace shardscope::gui
