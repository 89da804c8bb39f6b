#pragma once

#include <cstdint>

namespace shardscope::gui {

// An event of the trace the timeline shows: its rank's index and its index among that rank's
// events.
struct EventRef {
  int rank = -1;
  uint32_t event = 0;
  uint32_t folded = 1;  // hovering a fold: how many events it stands for
  bool valid() const { return rank >= 0; }
  bool operator==(const EventRef& o) const { return rank == o.rank && event == o.event; }
};

}  // namespace shardscope::gui
