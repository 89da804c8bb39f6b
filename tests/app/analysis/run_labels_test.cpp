// Runs named by what sets them apart, and "vs torch_ddp" only against the same model and batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/analysis/comparison_table.h"
#include "app/analysis/run_attributes.h"
#include "engine/train/config.h"
#include "engine/train/run.h"

namespace shardscope::analysis {
namespace {

// A finished run's trace: the run description `run` writes, with a result of the given peak.
profiling::Trace run_trace(const nlohmann::json& overrides, int64_t peak = 1000000) {
  Config config = config_from_json(overrides);
  finalize(config);
  profiling::Trace trace;
  trace.run = run_description(config);
  trace.run.result = profiling::RunResult{};
  trace.run.result->ok = true;
  for (int r = 0; r < config.world; ++r) {
    trace.run.result->ranks.emplace_back();
    trace.run.result->ranks.back().rank = r;
    trace.run.result->ranks.back().peak_allocated_bytes = peak;
  }
  return trace;
}

std::vector<std::string> labels_of(const std::vector<nlohmann::json>& configs) {
  std::vector<RunAttributes> runs;
  for (const auto& c : configs) runs.push_back(run_attributes(run_trace(c).run));
  return run_labels(runs);
}

const nlohmann::json kTiny = {{"preset", "tiny"}, {"world", 4}, {"strategy", "ddp_bucketed"}};

nlohmann::json with(nlohmann::json base, const nlohmann::json& patch) {
  base.merge_patch(patch);
  return base;
}

// Runs that differ in one setting are named by it, and only by it.
TEST(RunLabels, ShowOnlyWhatDiffers) {
  const auto labels = labels_of({with(kTiny, {{"strategy_options", {{"overlap", true}}}}),
                                 with(kTiny, {{"strategy_options", {{"overlap", false}}}})});
  EXPECT_EQ(labels[0], "ddp_bucketed w4, overlap on");
  EXPECT_EQ(labels[1], "ddp_bucketed w4, overlap off");
}

// Strategy and world always; nothing else when nothing else differs.
TEST(RunLabels, StrategyAndWorldAlways) {
  const auto labels = labels_of({kTiny, with(kTiny, {{"strategy", "zero2"}})});
  EXPECT_EQ(labels[0], "ddp_bucketed w4");
  EXPECT_EQ(labels[1], "zero2 w4");
}

// Every attribute of the list, each set apart in turn.
TEST(RunLabels, EachAttributeWhenItDiffers) {
  struct Case {
    nlohmann::json patch;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{{"preset", "small"}}, "ddp_bucketed w4, small"},
      {{{"strategy_options", {{"bucket_mb", 0.1}}}}, "ddp_bucketed w4, bucket 0.1 MB"},
      {{{"strategy_options", {{"precision", "bf16"}}}}, "ddp_bucketed w4, bf16"},
  };
  for (const auto& c : cases) {
    const auto labels = labels_of({kTiny, with(kTiny, c.patch)});
    EXPECT_EQ(labels[1], c.expected) << c.patch.dump();
    EXPECT_NE(labels[0], labels[1]);
  }
  // fsdp overlaps through prefetch.
  const nlohmann::json fsdp = with(kTiny, {{"strategy", "fsdp"}});
  EXPECT_EQ(labels_of({fsdp, with(fsdp, {{"strategy_options", {{"prefetch", false}}}})})[1],
            "fsdp w4, overlap off");
  // The schedule names pipeline runs only: a data-parallel run beside them has none.
  const nlohmann::json pp = {{"preset", "small"}, {"world", 2}, {"strategy", "pp"}};
  const auto pipeline = labels_of({pp, with(pp, {{"strategy_options", {{"schedule", "gpipe"}}}}),
                                   with(pp, {{"strategy", "ddp_bucketed"}})});
  EXPECT_EQ(pipeline[0], "pp w2, 1f1b");
  EXPECT_EQ(pipeline[1], "pp w2, gpipe");
  EXPECT_EQ(pipeline[2], "ddp_bucketed w2");
}

// The lens is a parameter: measured by default, device time when the caller says so.
TEST(RunLabels, LensWhenItDiffers) {
  const profiling::RunRecord run = run_trace(kTiny).run;
  const auto labels =
      run_labels({run_attributes(run), run_attributes(run, "device time on 8xH100")});
  EXPECT_EQ(labels[0], "ddp_bucketed w4, measured");
  EXPECT_EQ(labels[1], "ddp_bucketed w4, device time on 8xH100");
}

// A foreign trace has no attributes; it neither gets columns nor makes the others show all.
TEST(RunLabels, ForeignTraceIsATrace) {
  profiling::Trace foreign;
  foreign.run = profiling::run_record_from_json("{}");
  const auto labels =
      run_labels({run_attributes(run_trace(kTiny).run), run_attributes(foreign.run)});
  EXPECT_EQ(labels[0], "ddp_bucketed w4");
  EXPECT_EQ(labels[1], "trace");
  const ComparisonRow row = comparison_row(foreign);
  EXPECT_TRUE(row.no_result);
  const auto cells = comparison_cells(row, {row});
  EXPECT_EQ(std::count(cells.begin(), cells.end(), "FAILED"), 0);
}

// Compare has a column per differing attribute, after strategy and world.
TEST(CompareColumns, ShowWhatDiffers) {
  const std::vector<ComparisonRow> rows = {
      comparison_row(run_trace(with(kTiny, {{"strategy_options", {{"overlap", false}}}}))),
      comparison_row(run_trace(with(kTiny, {{"preset", "small"}}))),
      comparison_row(run_trace(kTiny))};
  const auto shown = distinguishing_columns(rows);
  EXPECT_EQ(shown, (std::vector<std::string>{"preset", "overlap"}));
  const auto headers = comparison_headers(shown);
  EXPECT_EQ(headers[2], "preset");
  EXPECT_EQ(headers[3], "overlap option");  // the setting, not the measured "overlap" column
  EXPECT_EQ(comparison_cells(rows[0], rows, shown)[3], "off");
  EXPECT_EQ(comparison_cells(rows[1], rows, shown)[2], "small");
  std::ostringstream table;
  print_comparison(rows, "markdown", table);
  EXPECT_NE(table.str().find("| preset"), std::string::npos) << table.str();
}

std::string vs_torch_ddp(const ComparisonRow& row, const std::vector<ComparisonRow>& rows) {
  const auto headers = comparison_headers();
  const auto at = std::find(headers.begin(), headers.end(), "vs torch_ddp") - headers.begin();
  return comparison_cells(row, rows, {})[at];
}

// Against torch_ddp of the same model and global batch: the change in peak, as a formula gives.
TEST(VsTorchDdp, SameModelAndBatch) {
  const std::vector<ComparisonRow> rows = {
      comparison_row(run_trace(with(kTiny, {{"strategy", "torch_ddp"}}), 2000000)),
      comparison_row(run_trace(with(kTiny, {{"strategy", "zero2"}}), 1500000))};
  EXPECT_EQ(vs_torch_ddp(rows[1], rows), "-25.0 %");
  EXPECT_EQ(vs_torch_ddp(rows[0], rows), "+0.0 %");
}

// Another model or another global batch: blank, and the cell says why.
TEST(VsTorchDdp, OtherModelOrBatchSaysWhy) {
  const std::vector<ComparisonRow> rows = {
      comparison_row(run_trace(with(kTiny, {{"strategy", "torch_ddp"}}), 2000000)),
      comparison_row(run_trace(with(kTiny, {{"strategy", "zero2"}, {"preset", "small"}}))),
      comparison_row(run_trace(with(kTiny, {{"strategy", "zero1"}, {"micro_batch", 8}}))),
      comparison_row(run_trace(with(kTiny, {{"strategy", "fsdp"}, {"model", {{"layers", 4}}}})))};
  EXPECT_EQ(vs_torch_ddp(rows[1], rows), "n/a: other model than torch_ddp's");
  EXPECT_EQ(vs_torch_ddp(rows[2], rows), "n/a: other global batch than torch_ddp's");
  EXPECT_EQ(vs_torch_ddp(rows[3], rows), "n/a: other model than torch_ddp's");
  // The same global batch from another split (world 2 x micro-batch 8) compares.
  const std::vector<ComparisonRow> split = {
      rows[0],
      comparison_row(run_trace(
          with(kTiny, {{"strategy", "zero2"}, {"world", 2}, {"micro_batch", 8}}), 1000000))};
  EXPECT_EQ(vs_torch_ddp(split[1], split), "-50.0 %");
  // No torch_ddp run at all: nothing to compare with, nothing to explain.
  EXPECT_EQ(vs_torch_ddp(rows[1], {rows[1], rows[2]}), "");
}

}  // namespace
}  // namespace shardscope::analysis
