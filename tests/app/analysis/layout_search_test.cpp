// `project --search` (issue 34): the layouts of a model over a cluster, projected, those that fit
// first and fastest first; for GPT-3 175B on 64 A100s, Megatron's own layout (Korthikanti et al.
// 2022, Table 5: tp 8, pp 8, interleaved with 3 stages a rank) is among the best.
#include <gtest/gtest.h>

#include <set>

#include <map>
#include <string>

#include "app/analysis/layout_search.h"
#include "engine/train/config.h"
#include "profiling/metrics/comm_links.h"
#include "profiling/projection/hardware_profile.h"

namespace shardscope::analysis {
namespace {

Config gpt3_on(int gpus) {
  Config c;
  c.model = preset_model("gpt3-175b");
  c.world = gpus;
  c.global_batch = 64;
  c.strategy_options.precision = "bf16";
  return c;
}

TEST(LayoutSearch, FittingLayoutsComeFirstFastestFirst) {
  const auto layouts = search_layouts(gpt3_on(64), profiling::load_hardware_profile("8xA100"), 8);
  ASSERT_GT(layouts.size(), 100u);
  for (size_t i = 1; i < layouts.size(); ++i) {
    if (layouts[i - 1].fits == layouts[i].fits) {
      EXPECT_LE(layouts[i - 1].step_s, layouts[i].step_s) << i;
    } else {
      EXPECT_TRUE(layouts[i - 1].fits) << i;
    }
    EXPECT_EQ(layouts[i].tp * layouts[i].pp * layouts[i].dp, 64) << layouts[i].label();
  }
}

TEST(LayoutSearch, MegatronsLayoutForGpt3IsAmongTheTenBest) {
  const auto layouts = search_layouts(gpt3_on(64), profiling::load_hardware_profile("8xA100"), 8);
  bool found = false;
  for (size_t i = 0; i < layouts.size() && i < 10 && layouts[i].fits; ++i) {
    const SearchedLayout& l = layouts[i];
    found |= l.tp == 8 && l.pp == 8 && l.stages_per_rank == 3 && l.schedule == "interleaved-1f1b";
  }
  EXPECT_TRUE(found) << search_text(layouts, 10);
}

}  // namespace
}  // namespace shardscope::analysis

namespace shardscope::analysis {
namespace {

// The projected step's trace (issue 34): every activation and gradient that crosses to another
// rank is a send linked to its receive, and each pass's tensor-parallel collectives are drawn
// (the rank waits through them), so the picture does not say "no communication".
// With the paper's attention the search also tries selective recompute: every layout each way,
// and selective recompute always faster than full recompute of the same layout (it runs only
// the attention again), though it keeps more than full recompute does.
TEST(LayoutSearch, WithUnfusedAttentionSelectiveRecomputeIsTriedBesideFull) {
  Config c = gpt3_on(64);
  c.model.attention = "unfused";
  const auto layouts = search_layouts(c, profiling::load_hardware_profile("8xA100"), 8);
  std::map<std::string, const SearchedLayout*> full;
  for (const auto& l : layouts) {
    EXPECT_FALSE(l.selective && l.recompute) << l.label();
    if (l.recompute) full[l.label()] = &l;
  }
  size_t compared = 0;
  for (const auto& l : layouts) {
    if (!l.selective) continue;
    std::string label = l.label();
    label.replace(label.find("selective recompute"), 19, "recompute");
    const auto it = full.find(label);
    ASSERT_NE(it, full.end()) << l.label();
    EXPECT_LT(l.step_s, it->second->step_s) << l.label();
    EXPECT_GT(l.peak_bytes, it->second->peak_bytes) << l.label();
    ++compared;
  }
  EXPECT_EQ(compared, full.size());
  EXPECT_GT(compared, 50u);
}

TEST(ConfigurationProjectionTrace, SendsLinkToReceivesAndTensorCollectivesAreDrawn) {
  Config c = gpt3_on(64);
  c.strategy = "hybrid";
  c.strategy_options.tensor_parallel = 8;
  c.strategy_options.pipeline_parallel = 8;
  c.strategy_options.micro_batches = 16;
  c.strategy_options.schedule = "interleaved-1f1b";
  c.strategy_options.stages_per_rank = 3;
  const ConfigurationProjection p =
      project_configuration(c, profiling::load_hardware_profile("8xA100"), 8);
  const profiling::Trace& t = p.trace;
  ASSERT_EQ(t.ranks.size(), 8u);
  int sends = 0, tensor = 0, waits = 0;
  for (const auto& rank : t.ranks) {
    for (const auto& e : rank.events) {
      sends += t.str(e.name) == "send";
      tensor += t.str(e.name) == "tensor-parallel collectives";
      waits += e.category == profiling::Category::kWait;
    }
  }
  // 96 stages over 8 ranks, v 3: every stage boundary crosses ranks, both ways, per micro-batch.
  EXPECT_EQ(sends, 2 * (8 * 3 - 1) * 16);
  int p2p = 0;
  for (const auto& link : profiling::link_communication(t)) p2p += link.point_to_point;
  EXPECT_EQ(p2p, sends);
  EXPECT_GT(tensor, 0);
  EXPECT_EQ(waits, tensor);
}

// A layout a model cannot take (a mixture of experts has no tensor-parallel block) is left out,
// and the search says why; the layouts without a tensor group remain.
TEST(LayoutSearch, AModelNoLayoutTakesSaysWhy) {
  Config c = gpt3_on(64);
  c.model.experts = 8;
  c.model.top_k = 2;
  std::string refused;
  const auto found = search_layouts(c, profiling::load_hardware_profile("8xA100"), 8, &refused);
  ASSERT_FALSE(found.empty());
  for (const auto& l : found) EXPECT_EQ(l.tp, 1) << l.label();
  EXPECT_NE(refused.find("mixture-of-experts"), std::string::npos) << refused;
  // Data parallelism of every ZeRO stage is among them, DDP's and ZeRO-3's too, also when the
  // search starts from a layout's flags (which a data-parallel strategy would refuse).
  for (bool from_a_layout : {false, true}) {
    Config from = c;
    if (from_a_layout) {
      from.strategy = "hybrid";
      from.strategy_options.tensor_parallel = 8;
      from.strategy_options.pipeline_parallel = 8;
      from.strategy_options.sequence_parallel = true;
      from.strategy_options.schedule = "interleaved-1f1b";
    }
    std::set<std::string> syncs;
    for (const auto& l : search_layouts(from, profiling::load_hardware_profile("8xA100"), 8))
      if (l.pp == 1) syncs.insert(l.data_parallel_sync);
    EXPECT_EQ(syncs.size(), 4u) << from_a_layout;
  }
}

}  // namespace
}  // namespace shardscope::analysis
