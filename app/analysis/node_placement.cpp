#include "app/analysis/node_placement.h"

#include <algorithm>

#include "engine/train/config.h"

namespace shardscope::analysis {

NodePlacement node_placement(int ranks, const profiling::HardwareProfile& hw) {
  NodePlacement p;
  const int per_node = std::max(1, hw.gpus_per_node);
  p.nodes = std::max(1, (ranks + per_node - 1) / per_node);
  p.inter_link_used = p.nodes > 1;
  const std::string rank_text = std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
  const std::string node_text = std::to_string(per_node) + " GPUs per node";
  const std::string inter = hw.inter.kind.empty() ? "inter-node link" : hw.inter.kind + " link";
  if (!p.inter_link_used) {
    p.note = "all " + rank_text + " fit in one node of " + hw.name + " (" + node_text + ")";
    p.note += hw.nodes > 1
                  ? ": the inter-node " + inter + " is unused, so this is one node's projection"
                  : ": only the intra-node " + hw.intra.kind + " link carries collectives";
    return p;
  }
  p.note = rank_text + " span " + std::to_string(p.nodes) + " nodes of " + hw.name + " (" +
           node_text + "): collectives cross the inter-node " + inter;
  if (p.nodes > hw.nodes) {
    p.note += "; " + hw.name + " has " + std::to_string(hw.nodes) +
              (hw.nodes == 1 ? " node" : " nodes") + ", the projection assumes " +
              std::to_string(p.nodes) + " of them";
  }
  return p;
}

profiling::HardwareProfile on_nodes(profiling::HardwareProfile hw, int nodes) {
  if (nodes < 0) throw ConfigError("nodes", "must be at least 1");
  if (nodes == 0) return hw;
  if (nodes > 1 && !hw.has_inter)
    throw ConfigError("nodes", hw.label() + " has no link between nodes ('inter')");
  if (nodes > 100000) throw ConfigError("nodes", "at most 100000");
  hw.nodes = nodes;
  return hw;
}

}  // namespace shardscope::analysis
