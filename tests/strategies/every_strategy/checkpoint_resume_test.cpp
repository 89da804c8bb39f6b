// Checkpoints and resume, for every strategy: a run interrupted by a fault and resumed from its
// last checkpoint ends bitwise where the uninterrupted run ends (CPU, thread mode); resumed at a
// different world size, the data-parallel and ZeRO strategies (and the model-parallel ones,
// which read the same layout-free state) still match the single-device reference.
#include <gtest/gtest.h>

#include <csignal>
#include <set>

#include "engine/launch/stop_request.h"
#include "engine/state/checkpoint.h"
#include "engine/state/weights.h"
#include "engine/train/run.h"
#include "engine/train/strategy_registry.h"
#include "tests/support/reference_check.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

struct Case {
  const char* name;
  const char* strategy;
  int world;
  void (*adjust)(Config&) = nullptr;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

void offload(Config& c) {
  c.strategy_options.offload = true;
}
void sgd(Config& c) {
  test::use_sgd_with_momentum(c);
}
void sequence_parallel(Config& c) {
  c.strategy_options.sequence_parallel = true;
}
void hybrid_zero1(Config& c) {
  c.strategy_options.tensor_parallel = 2;
  c.strategy_options.pipeline_parallel = 2;
  c.strategy_options.data_parallel_sync = "zero1";
}
void hybrid_ddp(Config& c) {
  c.strategy_options.tensor_parallel = 2;
  c.strategy_options.pipeline_parallel = 2;
}
void hybrid_tp2_cp2(Config& c) {
  c.strategy_options.tensor_parallel = 2;
  c.strategy_options.context_parallel = 2;
}
void cp2_zero1(Config& c) {
  c.strategy_options.context_parallel = 2;
  c.strategy_options.data_parallel_sync = "zero1";
}
void experts(Config& c) {
  c.model.experts = 4;
  c.model.top_k = 2;
}
void ep2_experts(Config& c) {
  experts(c);
  c.strategy_options.expert_parallel = 2;
}
void frozen_and_unused(Config& c) {
  c.model.frozen = {"blocks.0.ln1.weight"};
  c.model.unused_parameter = true;
  c.strategy_options.find_unused_parameters = true;
}

const Case kCases[] = {
    {"single", "single", 1},
    {"ddp_flat", "ddp_flat", 2},
    {"ddp_bucketed", "ddp_bucketed", 2},
    {"ddp_bucketed_sgd", "ddp_bucketed", 2, sgd},
    {"torch_ddp", "torch_ddp", 2},
    {"torch_ddp_frozen_unused", "torch_ddp", 2, frozen_and_unused},
    {"zero1", "zero1", 2},
    {"ddp_flat_zero1", "ddp_flat+zero1", 2},
    {"ddp_bucketed_zero1", "ddp_bucketed+zero1", 4},
    {"torch_ddp_zero1", "torch_ddp+zero1", 2},
    {"zero1_offload", "zero1", 2, offload},
    {"zero2", "zero2", 2},
    {"zero2_offload", "zero2", 2, offload},
    {"zero2_sgd", "zero2", 2, sgd},
    {"fsdp", "fsdp", 2},
    {"fsdp_frozen_unused", "fsdp", 2, frozen_and_unused},
    {"tp", "tp", 2},
    {"tp_sequence_parallel", "tp", 2, sequence_parallel},
    {"pp", "pp", 2},
    {"hybrid_ddp", "hybrid", 8, hybrid_ddp},
    {"hybrid_zero1", "hybrid", 8, hybrid_zero1},
    {"cp", "cp", 2},
    {"cp2_dp2_zero1", "cp", 4, cp2_zero1},
    {"hybrid_tp2_cp2", "hybrid", 4, hybrid_tp2_cp2},
    {"ep", "ep", 2, experts},
    {"ep2_of_4", "ep", 4, ep2_experts},
};

Config base_config(const Case& c) {
  // Built as ddp_bucketed first: a strategy may need the adjustment to validate (ep: experts).
  Config config = test::tiny_config("ddp_bucketed", c.world, 1);
  config.strategy = c.strategy;
  config.steps = 4;
  config.reference = false;
  if (c.adjust != nullptr) c.adjust(config);
  finalize(config);
  return config;
}

class CheckpointResume : public testing::TestWithParam<Case> {};

TEST_P(CheckpointResume, AFaultThenResumeEndsBitwiseWhereTheUninterruptedRunEnds) {
  const Case& c = GetParam();
  const Config config = base_config(c);
  const RunSummary uninterrupted = run_training(config);
  ASSERT_TRUE(uninterrupted.ok) << uninterrupted.failure;

  const std::string dir = test::test_temp_dir().string();
  Config interrupted = config;
  interrupted.checkpoint_every = 1;
  interrupted.checkpoint_dir = dir;
  interrupted.fault = parse_fault("rank=" + std::to_string(c.world - 1) + ",step=2,kind=throw");
  const RunSummary failed = run_training(interrupted);
  ASSERT_FALSE(failed.ok);
  EXPECT_EQ(failed.checkpoint, checkpoint_step_directory(dir, 2));

  Config resumed = config;
  resumed.resume = dir;
  const RunSummary after = run_training(resumed);
  ASSERT_TRUE(after.ok) << after.failure;
  EXPECT_EQ(after.resumed_step, 2);
  ASSERT_EQ(after.steps.size(), 2u);
  EXPECT_EQ(after.steps[0].step, 2);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(after.steps[i].loss, uninterrupted.steps[i + 2].loss) << "step " << i + 2;
  }
  ASSERT_EQ(after.ranks.size(), uninterrupted.ranks.size());
  for (size_t r = 0; r < after.ranks.size(); ++r) {
    EXPECT_EQ(after.ranks[r].checksum, uninterrupted.ranks[r].checksum) << "rank " << r;
  }
  EXPECT_EQ(compare_weights(after.weights, uninterrupted.weights).max_abs, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Strategies, CheckpointResume, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

TEST(CheckpointResumeCoverage, EveryRegisteredStrategyIsTested) {
  std::set<std::string> tested;
  for (const Case& c : kCases) tested.insert(c.strategy);
  for (const auto& name : StrategyRegistry::instance().names())
    EXPECT_TRUE(tested.count(name)) << name << " has no checkpoint/resume case";
}

// Written at one world size, resumed at another with the same global batch: the state is
// re-sharded from its layout-free regions, and training still matches the reference.
struct Reshard {
  const char* strategy;
  int from, to;
};

void PrintTo(const Reshard& c, std::ostream* os) {
  *os << c.strategy << " world " << c.from << " -> " << c.to;
}

class CheckpointReshard : public testing::TestWithParam<Reshard> {};

TEST_P(CheckpointReshard, ResumingAtAnotherWorldSizeStillMatchesTheReference) {
  const Reshard& c = GetParam();
  const std::string dir = test::test_temp_dir().string();
  Config first = test::tiny_config(c.strategy, c.from, 1);
  first.steps = 4;
  first.global_batch = 8;
  first.reference = false;
  first.checkpoint_every = 2;
  first.checkpoint_dir = dir;
  first.fault = parse_fault("rank=0,step=2,kind=throw");
  finalize(first);
  ASSERT_FALSE(run_training(first).ok);

  Config second = test::tiny_config(c.strategy, c.to, 1);
  second.steps = 4;
  second.global_batch = 8;
  second.resume = dir;
  finalize(second);
  const RunSummary s = run_training(second);
  ASSERT_TRUE(s.ok) << s.failure;
  EXPECT_EQ(s.resumed_step, 2);
  test::expect_matches_reference(s);
}

INSTANTIATE_TEST_SUITE_P(Strategies, CheckpointReshard,
                         testing::Values(Reshard{"ddp_bucketed", 2, 4}, Reshard{"torch_ddp", 4, 2},
                                         Reshard{"zero1", 2, 4}, Reshard{"zero2", 4, 2},
                                         Reshard{"zero2", 2, 4}, Reshard{"fsdp", 2, 4},
                                         Reshard{"fsdp", 4, 1}, Reshard{"tp", 2, 4},
                                         Reshard{"pp", 2, 1}),
                         [](const testing::TestParamInfo<Reshard>& info) {
                           return std::string(info.param.strategy) + "_" +
                                  std::to_string(info.param.from) + "_to_" +
                                  std::to_string(info.param.to);
                         });

// SIGINT/SIGTERM: every rank stops after the same step, the checkpoint is written, and resuming
// from it ends where an uninterrupted run ends.
// Trains `config`, with rank 0 asking to stop (as `signal` would) once step `step` is done.
RunSummary run_stopped_after(const Config& config, int step, int signal) {
  RunCallbacks callbacks;
  callbacks.on_step = [=](const StepRecord& r) {
    if (r.step == step) request_stop(signal);
  };
  RunSummary s = run_training(config, callbacks);
  clear_stop_request();
  return s;
}

TEST(CheckpointStop, AStopRequestEndsEveryRankAfterOneStepAndResumes) {
  Config config = test::tiny_config("zero2", 4, 1);
  config.steps = 6;
  config.reference = false;
  const RunSummary uninterrupted = run_training(config);
  ASSERT_TRUE(uninterrupted.ok) << uninterrupted.failure;

  const std::string dir = test::test_temp_dir().string();
  Config stopped = config;
  stopped.checkpoint_dir = dir;  // no periodic checkpoints: only the one the stop writes
  const RunSummary s = run_stopped_after(stopped, 1, SIGTERM);
  ASSERT_TRUE(s.ok) << s.failure;
  EXPECT_EQ(s.stopped_by_signal, SIGTERM);
  // Rank 0 asked after step 1's agreement; everyone learns of it at step 2's.
  ASSERT_EQ(s.steps.size(), 3u);
  EXPECT_EQ(s.checkpoint, checkpoint_step_directory(dir, 3));
  EXPECT_FALSE(s.reference.has_value());
  EXPECT_FALSE(s.trace.ranks.at(3).events.empty());

  Config resumed = config;
  resumed.resume = dir;
  const RunSummary after = run_training(resumed);
  ASSERT_TRUE(after.ok) << after.failure;
  EXPECT_EQ(weights_checksum(after.weights), weights_checksum(uninterrupted.weights));
}

// A stop asked for during the last step leaves the run complete but no reference to compare
// with (the reference would stop after its first step): it is reported stopped, not as a
// mismatch.
TEST(CheckpointStop, AStopDuringTheLastStepSkipsTheReferenceComparison) {
  Config config = test::tiny_config("ddp_bucketed", 2, 1);
  config.steps = 3;
  const RunSummary s = run_stopped_after(config, 2, SIGINT);
  ASSERT_TRUE(s.ok) << s.failure;
  EXPECT_EQ(s.steps.size(), 3u);
  EXPECT_EQ(s.stopped_by_signal, SIGINT);
  EXPECT_FALSE(s.reference.has_value());
}

}  // namespace
}  // namespace shardscope
