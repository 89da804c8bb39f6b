#include "app/gui/timeline_search.h"

#include <algorithm>
#include <numeric>

namespace shardscope::gui {

void SearchMatches::update(const profiling::Trace& trace, const std::string& text) {
  if (&trace == trace_ && text == text_ && trace.event_count() == events_) return;
  trace_ = &trace;
  text_ = text;
  events_ = trace.event_count();
  matches_.clear();
  starts_.clear();
  if (text.empty()) return;
  // Names are interned: test each string once, then collect the events that use a matching one.
  std::vector<bool> matching(trace.strings.size(), false);
  for (size_t s = 0; s < trace.strings.size(); ++s)
    matching[s] = trace.strings[s].find(text) != std::string::npos;
  for (size_t r = 0; r < trace.ranks.size(); ++r) {
    const auto& events = trace.ranks[r].events;
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].name < matching.size() && matching[events[i].name])
        matches_.push_back(EventRef{int(r), uint32_t(i)});
    }
  }
  std::stable_sort(matches_.begin(), matches_.end(), [&](const EventRef& a, const EventRef& b) {
    return trace.ranks[a.rank].events[a.event].t0_ns < trace.ranks[b.rank].events[b.event].t0_ns;
  });
  for (const EventRef& m : matches_) starts_.push_back(trace.ranks[m.rank].events[m.event].t0_ns);
}

size_t SearchMatches::position(EventRef ref) const {
  const auto it = std::find(matches_.begin(), matches_.end(), ref);
  return it == matches_.end() ? 0 : size_t(it - matches_.begin()) + 1;
}

EventRef SearchMatches::step(EventRef from, bool forward) const {
  if (matches_.empty()) return EventRef{};
  const size_t at = position(from);
  const size_t n = matches_.size();
  if (at == 0) return forward ? matches_.front() : matches_.back();
  return matches_[forward ? at % n : (at + n - 2) % n];
}

}  // namespace shardscope::gui
