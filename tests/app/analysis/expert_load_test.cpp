// The Experts tab's figures from a real ep run's trace: the routing the run recorded, who
// computes each expert, the imbalance, and the all_to_all bytes, each checked against a count
// made here from the same record; a trace without experts says why there is nothing to show.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include <nlohmann/json.hpp>
#include "app/analysis/expert_load.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

RunSummary ep_run(int world, int ep, int experts, int top_k) {
  Config c = test::tiny_config("ddp_bucketed", world, 1);
  c.strategy = "ep";
  c.model.experts = experts;
  c.model.top_k = top_k;
  c.strategy_options.expert_parallel = ep;
  c.reference = false;
  c.steps = 2;
  finalize(c);
  return run_training(c);
}

TEST(ExpertLoad, FiguresAreTheRecordedRouting) {
  const RunSummary s = ep_run(4, 2, 4, 2);
  ASSERT_TRUE(s.ok) << s.failure;
  const analysis::ExpertLoad load = analysis::expert_load(s.trace, 1, -1);
  ASSERT_TRUE(load.problem.empty()) << load.problem;
  EXPECT_EQ(load.experts, 4);
  EXPECT_EQ(load.expert_parallel, 2);
  EXPECT_EQ(load.ranks, 4);
  EXPECT_EQ(load.steps, 2);
  const auto& routed = s.trace.run.result->routed_tokens;
  const int64_t tokens = 2 * 32;  // micro-batch 2 of 32 tokens, per rank
  for (int r = 0; r < 4; ++r) {
    // Every token goes to k experts in each of the 2 layers.
    EXPECT_EQ(std::accumulate(load.sent[r].begin(), load.sent[r].end(), int64_t{0}),
              2 * tokens * 2);
    for (int e = 0; e < 4; ++e)
      EXPECT_EQ(load.sent[r][e], routed[r][1][e] + routed[r][1][4 + e]) << r << " " << e;
    EXPECT_GT(load.all_to_all_bytes[r], 0);
    EXPECT_DOUBLE_EQ(load.uniform_off_rank[r], 2.0 * tokens * 2 / 2);
  }
  // Rank 1 of each group of 2 holds experts 2 and 3, and computes what its group sent them.
  EXPECT_EQ(load.computed_by_rank[1],
            load.sent[0][2] + load.sent[0][3] + load.sent[1][2] + load.sent[1][3]);
  EXPECT_EQ(load.sent_off_rank[0], load.sent[0][2] + load.sent[0][3]);
  EXPECT_EQ(load.sent_off_rank[3], load.sent[3][0] + load.sent[3][1]);
  const int64_t busiest = *std::max_element(load.per_expert.begin(), load.per_expert.end());
  EXPECT_DOUBLE_EQ(load.expert_imbalance, double(busiest) / (4.0 * tokens * 2 * 2 / 4));
  EXPECT_GE(load.expert_imbalance, 1.0);

  // One layer and all steps: the pieces add up.
  const analysis::ExpertLoad first = analysis::expert_load(s.trace, -1, 0);
  const analysis::ExpertLoad second = analysis::expert_load(s.trace, -1, 1);
  const analysis::ExpertLoad all = analysis::expert_load(s.trace, -1, -1);
  for (int e = 0; e < 4; ++e)
    EXPECT_EQ(all.per_expert[e], first.per_expert[e] + second.per_expert[e]);
}

TEST(ExpertLoad, ARunWithoutExpertsSaysSo) {
  Config c = test::tiny_config("ddp_bucketed", 2, 1);
  c.reference = false;
  c.steps = 1;
  const RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  const analysis::ExpertLoad load = analysis::expert_load(s.trace, -1, -1);
  EXPECT_NE(load.problem.find("no experts"), std::string::npos) << load.problem;

  // A hostile record: counts of the wrong length are left out, negative ones count as none.
  profiling::Trace t = ep_run(2, 0, 4, 1).trace;
  ASSERT_TRUE(t.run.result.has_value());
  t.run.result->routed_tokens[0][0] = {1, 2, 3};
  t.run.result->routed_tokens[1][0].assign(8, -5);
  const analysis::ExpertLoad odd = analysis::expert_load(t, 0, -1);
  ASSERT_TRUE(odd.problem.empty());
  for (int e = 0; e < 4; ++e) {
    EXPECT_EQ(odd.sent[0][e], 0);
    EXPECT_EQ(odd.sent[1][e], 0);
  }
  EXPECT_EQ(odd.expert_imbalance, 0);

  // A configuration no run could have (5 experts cannot be spread over 2 ranks; -3 experts is
  // no model) says so instead of drawing it.
  auto config = nlohmann::json::parse(t.run.config_json);
  config["model"]["experts"] = 5;
  t.run.config_json = config.dump();
  const analysis::ExpertLoad bad = analysis::expert_load(t, -1, -1);
  EXPECT_NE(bad.problem.find("not one a run could have"), std::string::npos) << bad.problem;
  config["model"]["experts"] = -3;
  t.run.config_json = config.dump();
  EXPECT_FALSE(analysis::expert_load(t, -1, -1).problem.empty());
}

}  // namespace
}  // namespace shardscope
