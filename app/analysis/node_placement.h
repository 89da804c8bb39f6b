#pragma once

#include <string>

#include "profiling/projection/hardware_profile.h"

namespace shardscope::analysis {

// Where a run's ranks sit on a hardware profile, as the link model places them (a node filled
// before the next, collective_model.cpp): whether any collective crosses the inter-node link.
// The What-if says so, since a 2-node profile with every rank in one node projects exactly as
// one node does.
struct NodePlacement {
  int nodes = 1;                 // nodes the ranks occupy
  bool inter_link_used = false;  // some collective crosses nodes
  std::string note;              // the sentence the What-if shows
};
NodePlacement node_placement(int ranks, const profiling::HardwareProfile& hw);

// The profile with `nodes` nodes (`--nodes N`; 0 keeps the profile's own). Throws ConfigError
// naming "nodes" when the profile has no link between nodes or the count is absurd.
profiling::HardwareProfile on_nodes(profiling::HardwareProfile hw, int nodes);

}  // namespace shardscope::analysis
