#include "app/analysis/trace_figures.h"

#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "profiling/io/trace_io.h"
#include "strategies/pipeline/pipeline_schedule.h"
#include "tests/support/cli_runner.h"
#include "tests/support/pipeline_trace.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

using test::cli;

std::string written(const profiling::Trace& trace, const std::string& name) {
  const std::string path = (test::test_temp_dir() / name).string();
  std::ofstream(path, std::ios::binary) << profiling::serialise_trace(trace, path);
  return path;
}

TEST(TraceFigures, PipelineOfRunReadsStagesAndMicroBatchesFromTheConfig) {
  const auto p = analysis::pipeline_of_run(test::gpipe_trace(4, 8, 1, 0).run);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->stages, 4);
  EXPECT_EQ(p->micro_batches, 8);
  EXPECT_EQ(p->schedule, "gpipe");
  EXPECT_DOUBLE_EQ(p->formula, 3.0 / 11.0);
  EXPECT_EQ(p->stage_of_rank, (std::vector<int>{0, 1, 2, 3}));
  // Not a pipeline, and not a configuration at all.
  EXPECT_FALSE(analysis::pipeline_of_run(
      profiling::run_record_from_json(R"({"config": {"strategy": "ddp_bucketed", "world": 2}})")));
  EXPECT_FALSE(analysis::pipeline_of_run(
      profiling::run_record_from_json(R"({"config": {"strategy": "no such strategy"}})")));
  EXPECT_FALSE(analysis::pipeline_of_run(profiling::RunRecord{}));
}

TEST(TraceFigures, TheFormulaCountsEachRanksStages) {
  // Interleaved 1F1B, p = 2, m = 8, v = 2 (its default): (p - 1) / (v m + p - 1) = 1/17, not the
  // 1/9 of one stage per rank; zero-bubble over v = 2: 1/49.
  const auto interleaved = analysis::pipeline_of_run(profiling::run_record_from_json(
      R"({"config": {"strategy": "pp", "world": 2, "model": {"layers": 4},
          "strategy_options": {"micro_batches": 8, "schedule": "interleaved-1f1b"}}})"));
  ASSERT_TRUE(interleaved.has_value());
  EXPECT_DOUBLE_EQ(interleaved->formula, 1.0 / 17.0);
  // Each rank holds two stages, looped: report names both.
  EXPECT_EQ(interleaved->stages_held, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  const auto zero_bubble = analysis::pipeline_of_run(profiling::run_record_from_json(
      R"({"config": {"strategy": "pp", "world": 2, "model": {"layers": 4},
          "strategy_options": {"micro_batches": 8, "schedule": "zero-bubble",
                               "stages_per_rank": 2}}})"));
  ASSERT_TRUE(zero_bubble.has_value());
  EXPECT_DOUBLE_EQ(zero_bubble->formula, 1.0 / 49.0);
}

TEST(TraceFigures, EachStagesBubbleIsTheFormulaOnAUniformPipeline) {
  // A 4-stage, 8-micro-batch uniform GPipe run resumed at step 3: every stage idles exactly
  // (p - 1) / (m + p - 1) = 3/11 of the pipeline window.
  const auto j = analysis::figures_json(test::gpipe_trace(4, 8, 3, 3, 1000, 2000));
  ASSERT_EQ(j["ranks"].size(), 4u);
  EXPECT_NEAR(j["pipeline"]["bubble_formula"].get<double>(), 3.0 / 11.0, 1e-12);
  EXPECT_EQ(j["pipeline"]["micro_batches"], 8);
  const double window_s = 11 * 3000e-9;
  for (const auto& rank : j["ranks"]) {
    EXPECT_NEAR(rank["bubble_fraction"].get<double>(), 3.0 / 11.0, 1e-12) << rank;
    EXPECT_NEAR(rank["step_s"].get<double>(), window_s, 1e-15) << rank;
    EXPECT_EQ(rank["steps"], 2) << rank;  // step 3, the first after the resume, left out
    EXPECT_EQ(rank["overlap"], 0.0);
    EXPECT_EQ(rank["exposed_comm_s"], 0.0);
    EXPECT_EQ(rank["stage"], rank["rank"]);
  }
  EXPECT_NEAR(j["step_s"].get<double>(), window_s, 1e-15);
}

TEST(TraceFigures, ReportJsonGivesPerRankFiguresAndTheSlowestRanksStep) {
  // Whichever lens `report` uses, its JSON has every rank's figures, the formula beside the
  // bubbles, and the run's step is its slowest rank's.
  const std::string path = written(test::gpipe_trace(4, 8, 3, 3), "pipeline.sst");
  const auto r = cli({"report", path, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["ranks"].size(), 4u);
  EXPECT_EQ(j["strategy"], "pp");
  EXPECT_NEAR(j["pipeline"]["bubble_formula"].get<double>(), 3.0 / 11.0, 1e-12);
  double slowest = 0;
  for (const auto& rank : j["ranks"]) {
    for (const char* key : {"step_s", "exposed_comm_s", "overlap", "bubble_fraction"})
      EXPECT_TRUE(rank[key].is_number()) << key << " in " << rank;
    slowest = std::max(slowest, rank["step_s"].get<double>());
  }
  EXPECT_GT(slowest, 0);
  EXPECT_DOUBLE_EQ(j["step_s"].get<double>(), slowest);
}

TEST(TraceFigures, RunStepIsTheSlowestRanksAndDataParallelHasNoBubble) {
  auto trace = test::gpipe_trace(2, 2, 3, 0);
  trace.run = profiling::run_record_from_json(R"({"strategy": "ddp_bucketed", "world": 2,
                       "config": {"strategy": "ddp_bucketed", "world": 2}})");
  // Rank 1's steps take longer by 1 us: the run waits for it.
  for (auto& e : trace.ranks[1].events) {
    if (e.category == profiling::Category::kStep) e.t1_ns += 1000;
  }
  const auto j = analysis::figures_json(trace);
  EXPECT_TRUE(j["pipeline"].is_null());
  EXPECT_TRUE(j["ranks"][0]["bubble_fraction"].is_null());
  EXPECT_LT(j["ranks"][0]["step_s"].get<double>(), j["ranks"][1]["step_s"].get<double>());
  EXPECT_DOUBLE_EQ(j["step_s"].get<double>(), j["ranks"][1]["step_s"].get<double>());
}

TEST(TraceFigures, ProjectJsonGivesMeasuredAndProjectedFigures) {
  const std::string path = written(test::gpipe_trace(4, 8, 3, 0), "pipeline.sst");
  const auto r = cli({"project", path, "--json", "--hardware", "8xH100", "--compute-scale", "0.5"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["hardware"], "8xH100");
  EXPECT_DOUBLE_EQ(j["compute_scale"].get<double>(), 0.5);
  ASSERT_EQ(j["measured"]["ranks"].size(), 4u);
  ASSERT_EQ(j["projected"]["ranks"].size(), 4u);
  EXPECT_NEAR(j["measured"]["ranks"][2]["bubble_fraction"].get<double>(), 3.0 / 11.0, 1e-12);
  EXPECT_EQ(j["measured"], analysis::figures_json(profiling::read_trace_file(path)));
  // Half the compute time, nothing else to price. The stages' idle time here is no wait the
  // trace records (it has no sends), so it is host time, which hides behind each device's own
  // work: a step is its 8 micro-batches' compute, 8 of the 11 slots of the measured window, at
  // half the time.
  EXPECT_NEAR(j["projected"]["step_s"].get<double>(),
              j["measured"]["step_s"].get<double>() * 8.0 / 11.0 / 2, 1e-9);
}

// The papers' zero-bubble figures assume equal forward, input and weight passes; report prints the
// schedule's bubble with the passes the run measured, by the pipeline runtime's span names (the
// model's nested block spans are not passes).
TEST(TraceFigures, MeasuredPassesAreTheMediansOfThePipelinesOwnSpans) {
  profiling::Trace t;
  for (int r = 0; r < 2; ++r) {
    profiling::RankTrace rank;
    rank.rank = r;
    rank.lanes = {"host"};
    t.ranks.push_back(rank);
  }
  auto add = [&](int rank, const std::string& name, profiling::Category c, int64_t ms) {
    profiling::Event e;
    e.name = t.intern(name);
    e.category = c;
    e.t0_ns = 0;
    e.t1_ns = ms * 1000000;
    t.ranks[rank].events.push_back(e);
  };
  using profiling::Category;
  EXPECT_FALSE(analysis::measured_passes(t).has_value());
  for (int r = 0; r < 2; ++r) {
    add(r, "forward micro-batch 0 stage " + std::to_string(r), Category::kForward, 2);
    add(r, "forward block 1", Category::kForward, 9);  // nested in a pass: not one
    add(r, "backward input micro-batch 0 stage " + std::to_string(r), Category::kBackward, 3);
    add(r, "backward weights micro-batch 0 stage " + std::to_string(r), Category::kBackward, 1);
  }
  const auto passes = analysis::measured_passes(t);
  ASSERT_TRUE(passes.has_value());
  EXPECT_DOUBLE_EQ(passes->forward_s, 2e-3);
  EXPECT_DOUBLE_EQ(passes->input_s, 3e-3);
  EXPECT_DOUBLE_EQ(passes->weight_s, 1e-3);
  analysis::RunPipeline zb;
  zb.stages = 2;
  zb.micro_batches = 4;
  zb.schedule = "zero-bubble";
  zb.stages_per_rank = 2;
  const double bubble = analysis::bubble_with_measured_passes(zb, *passes);
  EXPECT_DOUBLE_EQ(bubble, pipeline::simulated_bubble("zero-bubble", 2, 4, 2, {2e-3, 3e-3, 1e-3}));
  // Unequal passes idle more than the paper's equal ones.
  EXPECT_GT(bubble, pipeline::bubble_formula("zero-bubble", 2, 4, 2));

  // A whole backward (not split) counts half to each pass.
  profiling::Trace whole;
  profiling::RankTrace rank;
  rank.lanes = {"host"};
  whole.ranks.push_back(rank);
  t = whole;
  add(0, "forward micro-batch 0", Category::kForward, 2);
  add(0, "backward micro-batch 0", Category::kBackward, 4);
  const auto halves = analysis::measured_passes(t);
  ASSERT_TRUE(halves.has_value());
  EXPECT_DOUBLE_EQ(halves->input_s, 2e-3);
  EXPECT_DOUBLE_EQ(halves->weight_s, 2e-3);
}

}  // namespace
}  // namespace shardscope
