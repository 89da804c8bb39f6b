// A recorded run replayed onto a GPU profile with its passes priced kernel by kernel
// (app/analysis/pass_pricing): the same model as `project` of its configuration, so the two
// agree; and a small model on an H100 is bound by launches, which the projection says.
#include "app/analysis/pass_pricing.h"

#include <gtest/gtest.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "app/analysis/configuration_projection.h"
#include "app/analysis/trace_projection.h"
#include "engine/train/run.h"
#include "profiling/trace/pipeline_pass_names.h"
#include "strategies/common/memory_formula.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

// A recorded run of `strategy` (a pipeline's schedule after a colon: "pp:zbv"; "+moe": with a
// mixture of 4 experts, top 2, in each block).
RunSummary recorded(const std::string& name, int world) {
  const auto plus = name.find("+moe");
  const std::string strategy = name.substr(0, plus);
  const auto colon = strategy.find(':');
  Config config =
      test::tiny_config(strategy == "ep" ? "ddp_bucketed" : strategy.substr(0, colon), world, 1);
  config.strategy = strategy.substr(0, colon);
  if (plus != std::string::npos) {
    config.model.experts = 4;
    config.model.top_k = 2;
  }
  config.reference = false;
  config.steps = 4;
  config.model.layers = 4;  // blocks, not the optimizer, make most of a pass
  if (colon != std::string::npos) {
    config.strategy_options.schedule = strategy.substr(colon + 1);
    config.strategy_options.micro_batches = 4;
  }
  finalize(config);
  RunSummary s = run_training(config);
  EXPECT_TRUE(s.ok) << s.failure;
  return s;
}

// Its configuration in bf16 (what a GPU projection prices unless told fp32), projected without
// running.
double configured_step(Config config, const profiling::HardwareProfile& hw,
                       const std::string& precision = "bf16") {
  config.strategy_options.precision = precision;
  return analysis::project_configuration(config, hw, 1).step_s;
}

// A recorded run's configuration with the precision its kernels are to be priced in: bf16, as
// `project` prices a trace unless told fp32 (the runs here recorded run's default, fp32).
Config priced_in(Config config, const std::string& precision = "bf16") {
  config.strategy_options.precision = precision;
  return config;
}

bool starts(const std::string& name, std::string_view prefix) {
  return name.rfind(prefix, 0) == 0;
}

// What the projected trace's spans of our GPT's units (or a pipeline stage's backward passes,
// whole or split) of `step` add up to over all ranks: forward or backward.
double projected_pass(const profiling::Trace& t, int step, bool forward) {
  double seconds = 0;
  for (const auto& rank : t.ranks) {
    for (const auto& e : rank.events) {
      const std::string name = t.str(e.name);
      const bool unit = forward
                            ? starts(name, "forward embeddings") ||
                                  starts(name, "forward blocks.") || starts(name, "forward head")
                            : starts(name, "backward blocks.") || starts(name, "backward head") ||
                                  starts(name, profiling::kBackwardPassSpan) ||
                                  starts(name, profiling::kInputPassSpan) ||
                                  starts(name, profiling::kWeightPassSpan);
      if (unit && e.step == step && e.lane == profiling::kHostLane)
        seconds += (e.t1_ns - e.t0_ns) * 1e-9;
    }
  }
  return seconds;
}

// Data-parallel, tensor-parallel, pipelined (one stage a rank, two in a V, backward whole or split
// into input and weight passes), context-parallel (a ring's attention) and mixture-of-experts runs
// (experts where the tokens are, or reached by expert parallelism's all_to_all) replay as
// `project` prices their configuration.
TEST(PassPricing, ARecordedRunProjectsAsItsConfigurationDoes) {
  const auto hw = profiling::load_hardware_profile("8xH100");
  for (const auto& [strategy, world] :
       std::vector<std::pair<std::string, int>>{{"single", 1},
                                                {"tp", 2},
                                                {"pp:1f1b", 2},
                                                {"pp:gpipe", 2},
                                                {"pp:zbv", 2},
                                                {"cp", 2},
                                                {"ddp_bucketed+moe", 2},
                                                {"ep+moe", 2}}) {
    const RunSummary s = recorded(strategy, world);
    ASSERT_TRUE(s.ok);
    const analysis::TraceProjection t = analysis::project_recorded_trace(s.trace, hw, 0);
    ASSERT_FALSE(t.compute_model.empty()) << strategy;
    const double configured = configured_step(s.config, hw);
    // What the replay adds: the host's own time between passes (at the matmul ratio) and, for
    // tp, its collectives on NVLink, both small against the passes of a launch-bound GPU; a
    // pipeline's bubble comes from its recorded order, the configuration's from its schedule.
    EXPECT_NEAR(t.projected_summary.step_s, configured, 0.1 * configured)
        << strategy << ": replayed " << t.projected_summary.step_s * 1e3 << " ms, configured "
        << configured * 1e3 << " ms";
    // Pass by pass: the projected forward and backward take what the model priced, plus at
    // most their tensor group's collectives on the links (some of which, the token gathers and
    // the loss's, fall outside the unit spans). Each micro-batch goes through the whole model
    // once on each rank of a stage's tensor group.
    const auto pricing = analysis::price_recorded_passes(s.trace, priced_in(s.config), hw);
    ASSERT_TRUE(pricing.has_value());
    const profiling::TrainingLayout layout = memory_layout(s.config);
    const int micro_batches = std::max(1, layout.micro_batches);
    const int pp = std::max(1, layout.pp);
    const double passes = double(micro_batches) * world / pp;
    for (const bool forward : {true, false}) {
      const double compute = passes * (forward ? pricing->forward_s : pricing->backward_s);
      const double comm = passes * (forward ? pricing->forward_comm_s : pricing->backward_comm_s);
      const double projected = projected_pass(t.projected, 2, forward);
      EXPECT_GE(projected, 0.95 * compute) << strategy << (forward ? " forward" : " backward");
      // Peers reach each collective inside a pass together, as identical work on GPUs does:
      // no rank waits in projected time on this machine's noise (an ep backward waited 0.4-1.8
      // ms of 15.5 when each rank's calls sat where its own noisy recording put them).
      EXPECT_LE(projected, 1.01 * (compute + comm))
          << strategy << (forward ? " forward" : " backward");
    }
    // A tiny model on an H100 waits on its host's launches, and the projection says so.
    EXPECT_TRUE(t.launch_bound) << t.compute_model;
    EXPECT_NE(t.compute_model.find("bound by launches"), std::string::npos) << t.compute_model;
  }
}

// Told fp32, a replay prices the run's kernels at the GPU's measured fp32 rates, as `project`
// prices the same configuration in fp32: no autocast casts (fewer ops a micro-batch than bf16's),
// and the same step within a tenth. A mixture of experts and a context ring are priced in bf16
// only, and a profile without fp32 rates cannot price it: each refused, naming the precision.
TEST(PassPricing, AnFp32ReplayProjectsAsItsFp32ConfigurationDoes) {
  const auto hw = profiling::load_hardware_profile("8xH100");
  for (const auto& [strategy, world] : std::vector<std::pair<std::string, int>>{
           {"single", 1}, {"tp", 2}, {"pp:1f1b", 2}, {"ddp_bucketed", 2}}) {
    const RunSummary s = recorded(strategy, world);
    ASSERT_TRUE(s.ok);
    const analysis::TraceProjection t = analysis::project_recorded_trace(s.trace, hw, 0, "fp32");
    EXPECT_EQ(t.precision, "fp32");
    EXPECT_NE(t.compute_model.find("fp32 kernels"), std::string::npos) << t.compute_model;
    const double configured = configured_step(s.config, hw, "fp32");
    EXPECT_NEAR(t.projected_summary.step_s, configured, 0.1 * configured)
        << strategy << ": replayed " << t.projected_summary.step_s * 1e3 << " ms, configured "
        << configured * 1e3 << " ms";
    const auto bf16 = analysis::price_recorded_passes(s.trace, priced_in(s.config), hw);
    const auto fp32 = analysis::price_recorded_passes(s.trace, priced_in(s.config, "fp32"), hw);
    ASSERT_TRUE(bf16 && fp32) << strategy;
    EXPECT_LT(fp32->ops_per_micro_batch, bf16->ops_per_micro_batch) << strategy;
  }
  for (const auto& [strategy, world] :
       std::vector<std::pair<std::string, int>>{{"cp", 2}, {"ep+moe", 2}}) {
    const RunSummary s = recorded(strategy, world);
    ASSERT_TRUE(s.ok);
    try {
      analysis::project_recorded_trace(s.trace, hw, 0, "fp32");
      ADD_FAILURE() << strategy << " priced in fp32";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.field(), "strategy_options.precision") << strategy;
    }
  }
  const RunSummary single = recorded("single", 1);
  ASSERT_TRUE(single.ok);
  try {
    analysis::project_recorded_trace(single.trace, profiling::load_hardware_profile("8xA100"), 0,
                                     "fp32");
    ADD_FAILURE() << "fp32 priced on 8xA100, which measured no fp32 rates";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "strategy_options.precision");
  }
}

TEST(PassPricing, WhatTheModelCannotPriceKeepsTheScale) {
  // A profile with no per-kernel rates, or compute as measured.
  const RunSummary single = recorded("single", 1);
  ASSERT_TRUE(single.ok);
  EXPECT_FALSE(analysis::price_recorded_passes(single.trace, priced_in(single.config),
                                               profiling::load_hardware_profile("cpu-10GbE")));
  // Context parallelism's ring computes in fp32: a GPU without an fp32 rate cannot price it.
  const RunSummary cp = recorded("cp", 2);
  ASSERT_TRUE(cp.ok);
  auto no_fp32 = profiling::load_hardware_profile("8xH100");
  no_fp32.gpu.fp32_tflops = 0;
  EXPECT_FALSE(analysis::price_recorded_passes(cp.trace, priced_in(cp.config), no_fp32));
  const analysis::TraceProjection t = analysis::project_recorded_trace(cp.trace, no_fp32, 0);
  EXPECT_TRUE(t.compute_model.empty());
  EXPECT_TRUE(analysis::price_recorded_passes(cp.trace, priced_in(cp.config),
                                              profiling::load_hardware_profile("8xH100")));
}

// Issue 34's measured points: our engine's step at world 1 on an H100 80GB HBM3 without device
// tracing, bf16 (scripts/gpu-check.sh, 2026-11-26, median of 18 steps): tiny 5.12, small 10.08,
// gpt2-small 31.41 ms. Small models there are bound by the host, which the projection prices
// from the host costs measured op by op (perf --only host-ops) and the census of our GPT's ops,
// neither of which looked at these step times. Each within a quarter, as the issue asks.
TEST(ProjectionCheck, SmallModelsAtWorldOneComeWithinAQuarterOfAnH100) {
  const auto hw = profiling::load_hardware_profile("8xH100");
  for (const auto& [preset, measured_ms] : std::vector<std::pair<std::string, double>>{
           {"tiny", 5.12}, {"small", 10.08}, {"gpt2-small", 31.41}}) {
    Config config = config_from_json(nlohmann::json{{"strategy", "single"}, {"preset", preset}});
    finalize(config);
    const double projected_ms = configured_step(config, hw) * 1e3;
    EXPECT_NEAR(projected_ms / measured_ms, 1.0, 0.25)
        << preset << ": projected " << projected_ms << " ms, measured " << measured_ms << " ms";
  }
}

// The same runs in fp32 (the same session and machine, `--no-device-tracing`, median of steps
// 3-20; docs/running-on-a-gpu.md): tiny 3.8, small 11.2, gpt2-small 92.8 ms. gpt2-small is bound
// by its fp32 GEMMs and attention, which the projection prices at the rates an fp32 sweep of
// the same GPU model measured (scripts/gpu-measure.py --fp32, a GEMM sweep and four attention
// shapes, none of them a step); tiny and small by the host, without autocast's casts.
TEST(ProjectionCheck, SmallModelsInFp32AtWorldOneComeWithinAQuarterOfAnH100) {
  const auto hw = profiling::load_hardware_profile("8xH100");
  ASSERT_TRUE(hw.gpu.prices_fp32());
  for (const auto& [preset, measured_ms] : std::vector<std::pair<std::string, double>>{
           {"tiny", 3.8}, {"small", 11.2}, {"gpt2-small", 92.8}}) {
    Config config = config_from_json(nlohmann::json{{"strategy", "single"}, {"preset", preset}});
    finalize(config);
    const double projected_ms = configured_step(config, hw, "fp32") * 1e3;
    EXPECT_NEAR(projected_ms / measured_ms, 1.0, 0.25)
        << preset << ": projected " << projected_ms << " ms, measured " << measured_ms << " ms";
    std::cout << preset << " fp32: projected " << projected_ms << " ms, measured " << measured_ms
              << " ms; bf16 projected " << configured_step(config, hw) * 1e3 << " ms\n";
  }
}

// ZeRO's stages shard the optimizer's state over the data-parallel group: each rank steps 1/d of
// the parameters, so a step bound by memory (a large model) takes 1/d of the time. Before, the
// projection priced every rank's step over all of them.
TEST(ProjectionCheck, ZeroStepsEachRanksShareOfTheOptimizer) {
  const auto hw = profiling::load_hardware_profile("8xA100");
  const auto optimizer_s = [&](const std::string& strategy) {
    Config config = config_from_json(nlohmann::json{{"strategy", strategy},
                                                    {"world", 8},
                                                    {"preset", "gpt3-175b"},
                                                    {"strategy_options", {{"precision", "bf16"}}}});
    return analysis::project_configuration(config, hw, 1).optimizer_s;
  };
  const double replicated = optimizer_s("ddp_bucketed");
  ASSERT_GT(replicated, 0);
  for (const char* zero : {"zero1", "zero2", "fsdp"})
    EXPECT_NEAR(optimizer_s(zero), replicated / 8, replicated * 1e-9) << zero;
}

}  // namespace
}  // namespace shardscope
