// The What-if says when every rank fits in one node and the inter-node link carries nothing.
#include "app/analysis/node_placement.h"

#include <gtest/gtest.h>

#include "profiling/projection/collective_model.h"

namespace shardscope::analysis {
namespace {

// 4 ranks on 2 nodes of 8: one node, and the projection is that of one node: every collective
// costs what it costs on the same machine without its network.
TEST(NodePlacement, RanksInOneNodeLeaveTheInterNodeLinkUnused) {
  const auto two_nodes = profiling::load_hardware_profile("2x8xH100-IB");
  const NodePlacement p = node_placement(4, two_nodes);
  EXPECT_EQ(p.nodes, 1);
  EXPECT_FALSE(p.inter_link_used);
  EXPECT_NE(p.note.find("all 4 ranks fit in one node"), std::string::npos) << p.note;
  EXPECT_NE(p.note.find("infiniband link is unused"), std::string::npos) << p.note;
  profiling::HardwareProfile one_node = two_nodes;
  one_node.nodes = 1;
  one_node.inter = profiling::Link{};
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter"}) {
    EXPECT_DOUBLE_EQ(profiling::estimate_collective(op, 1 << 20, 4, two_nodes, "auto").time_s,
                     profiling::estimate_collective(op, 1 << 20, 4, one_node, "auto").time_s)
        << op;
  }
}

// 16 ranks fill both nodes: collectives cross the network, and cost more than in one node.
TEST(NodePlacement, RanksPastOneNodeCrossTheNetwork) {
  const auto two_nodes = profiling::load_hardware_profile("2x8xH100-IB");
  const NodePlacement p = node_placement(16, two_nodes);
  EXPECT_EQ(p.nodes, 2);
  EXPECT_TRUE(p.inter_link_used);
  EXPECT_NE(p.note.find("span 2 nodes"), std::string::npos) << p.note;
  EXPECT_GT(profiling::estimate_collective("all_reduce", 1 << 26, 16, two_nodes, "auto").time_s,
            profiling::estimate_collective("all_reduce", 1 << 26, 8, two_nodes, "auto").time_s);
}

// A single-node profile: one node while the ranks fit, and it says when they do not.
TEST(NodePlacement, SingleNodeProfile) {
  const auto h100 = profiling::load_hardware_profile("8xH100");
  EXPECT_NE(node_placement(8, h100).note.find("only the intra-node"), std::string::npos);
  const NodePlacement over = node_placement(12, h100);
  EXPECT_EQ(over.nodes, 2);
  EXPECT_NE(over.note.find("assumes 2"), std::string::npos) << over.note;
}

}  // namespace
}  // namespace shardscope::analysis
