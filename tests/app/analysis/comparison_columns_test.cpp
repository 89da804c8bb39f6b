// Compare's columns say what is true: what crosses the wire per rank as busbw counts it (ZeRO-2
// moves what DDP moves), the slowest rank's overlap beside the median, a step time's spread with
// differences inside it marked "within spread", and a row's layout.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/analysis/comparison_table.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope::analysis {
namespace {

ComparisonRow recorded(const std::string& strategy, int world, int pipeline = 0) {
  nlohmann::json j = {{"preset", "tiny"}, {"strategy", strategy}, {"world", world},
                      {"steps", 3},       {"micro_batch", 4},     {"data", "synthetic"}};
  if (pipeline > 0) j["strategy_options"] = {{"pipeline_parallel", pipeline}};
  Config c = config_from_json(j);
  finalize(c);
  c.reference = false;
  const RunSummary s = run_training(c);
  EXPECT_TRUE(s.ok) << strategy << ": " << s.failure;
  return comparison_row(s.trace);
}

// The ring all_reduce of every fp32 gradient moves 2(n-1)/n of them per rank; ZeRO-2's
// reduce_scatter and all_gather move (n-1)/n each, the same (Rajbhandari et al. 2020, 7.1).
TEST(ComparisonColumns, WireBytesFollowTheAlgorithmAndZeroTwoMovesWhatDdpMoves) {
  const int n = 4;
  Config c = test::tiny_config("ddp_bucketed", n, 1);
  c.steps = 3;
  c.reference = false;
  const RunSummary ddp_run = run_training(c);
  ASSERT_TRUE(ddp_run.ok) << ddp_run.failure;
  const ComparisonRow ddp = comparison_row(ddp_run.trace);
  const double parameters = double(ddp_run.trace.run.result->parameters);
  ASSERT_GT(parameters, 0);
  const double ring = 2.0 * (n - 1) / n * parameters * 4;
  EXPECT_NEAR(ddp.wire_bytes_per_step, ring, ring * 0.01);
  const ComparisonRow zero2 = recorded("zero2", n);
  // A flat shard pads the parameters to a multiple of the world: a few bytes more at most.
  EXPECT_NEAR(zero2.wire_bytes_per_step, ddp.wire_bytes_per_step, ring * 0.01);
  // What a rank hands to collectives (the run's own count) stays beside it.
  EXPECT_GT(zero2.bytes_per_step, 0);
}

TEST(ComparisonColumns, AModelParallelRowNamesItsLayout) {
  const ComparisonRow pp = recorded("pp", 4, 2);  // tiny's two blocks: dp2 x pp2
  const auto cells = comparison_cells(pp, {pp});
  EXPECT_EQ(cells[0], "pp (dp2 x pp2)");
  const ComparisonRow ddp = recorded("ddp_bucketed", 2);
  EXPECT_EQ(comparison_cells(ddp, {ddp})[0], "ddp_bucketed");
}

ComparisonRow timed(const std::string& strategy, double step, double low, double high,
                    double overlap, double worst) {
  ComparisonRow r;
  r.strategy = strategy;
  r.ok = true;
  r.step_s = step;
  r.step_min_s = low;
  r.step_max_s = high;
  r.overlap = overlap;
  r.overlap_worst = worst;
  return r;
}

TEST(ComparisonColumns, StepTimesShowTheirSpreadAndDifferencesInsideItAreTheSame) {
  const std::vector<ComparisonRow> rows = {timed("a", 0.0059, 0.0050, 0.0070, 0.89, 0.29),
                                           timed("b", 0.0065, 0.0061, 0.0080, 0.5, 0.5),
                                           timed("c", 0.0120, 0.0110, 0.0130, 0.5, 0.5)};
  const auto headers = comparison_headers();
  auto column = [&](const std::string& name) {
    for (size_t i = 0; i < headers.size(); ++i)
      if (headers[i] == name) return i;
    ADD_FAILURE() << "no column " << name;
    return size_t{0};
  };
  const auto a = comparison_cells(rows[0], rows), b = comparison_cells(rows[1], rows),
             c = comparison_cells(rows[2], rows);
  EXPECT_EQ(a[column("step ms")], "5.90 (5.00-7.00)");
  EXPECT_EQ(a[column("vs fastest")], "fastest");
  EXPECT_EQ(b[column("vs fastest")], "within spread");  // 6.1 ms is inside a's 5.0-7.0
  EXPECT_EQ(c[column("vs fastest")], "+103 %");
  // The rank that overlaps least, beside the median of all.
  EXPECT_EQ(a[column("overlap worst rank / median")], "29 % / 89 %");
}

}  // namespace
}  // namespace shardscope::analysis
