// Device time is a claim about what N devices would do. It must obey the physics a student is
// taught: overlapping communication with compute never makes a step slower and hides some of the
// communication, on every shipped hardware profile; PyTorch's DDP and ours, with the same
// buckets, take the same time; a pipeline of equal stages idles (p-1)/(m+p-1) of its step.
#include "app/analysis/device_time_lens.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include "app/analysis/trace_projection.h"

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "profiling/metrics/trace_metrics.h"
#include "profiling/projection/hardware_profile.h"
#include "strategies/pipeline/pipeline_schedule.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

profiling::Trace record(Config c) {
  c.reference = false;
  RunSummary s = run_training(c);
  EXPECT_TRUE(s.ok) << c.strategy << ": " << s.failure;
  return s.trace;
}

// tiny at world 4, 6 steps of 4 sequences per rank: its default buckets are several (the cap
// scales to the model), so there is something to overlap.
Config data_parallel(const std::string& strategy, bool overlap) {
  Config c = test::tiny_config(strategy, 4, 1);
  c.steps = 6;
  c.micro_batch = 4;
  c.strategy_options.overlap = overlap;
  c.strategy_options.prefetch = overlap;  // fsdp's overlap: the next unit's all-gather
  return c;
}

struct Timing {
  double step_s = 0, exposed_s = 0;
};

// A step's time is its slowest rank's; exposed communication the mean over ranks. Of the steps
// after the first, the fastest: a recording's compute is only made slower by whatever else the
// machine does meanwhile (another test, a build), never faster, so the least is the cleanest.
Timing on(const profiling::Trace& measured, const std::string& hardware, double compute_scale) {
  analysis::Lens lens;
  lens.hardware = hardware;
  lens.compute_scale = compute_scale;
  const analysis::LensedTrace lensed = analysis::apply_lens(measured, lens);
  EXPECT_TRUE(lensed.device_time) << lensed.note;
  std::map<int, Timing> steps;
  std::map<int, int> ranks;
  for (const auto& m : profiling::step_metrics(lensed.trace)) {
    if (m.step == 0) continue;
    Timing& t = steps[m.step];
    t.step_s = std::max(t.step_s, m.span_ns * 1e-9);
    t.exposed_s += m.exposed_comm_ns * 1e-9;
    ++ranks[m.step];
  }
  Timing best{1e30, 1e30};
  for (auto& [step, t] : steps) {
    best.step_s = std::min(best.step_s, t.step_s);
    best.exposed_s = std::min(best.exposed_s, t.exposed_s / ranks[step]);
  }
  return best;
}

// The least over a few recordings of the same run, for the same reason.
Timing best_of(const std::vector<profiling::Trace>& recordings, const std::string& hardware,
               double compute_scale = 0) {
  Timing best{1e30, 1e30};
  for (const auto& trace : recordings) {
    const Timing t = on(trace, hardware, compute_scale);
    best.step_s = std::min(best.step_s, t.step_s);
    best.exposed_s = std::min(best.exposed_s, t.exposed_s);
  }
  return best;
}

// Two runs recorded in turn, n of each: this machine's speed drifts by tens of percent over
// seconds (a shared host), and recording one run's n before the other's would compare the drift.
std::pair<std::vector<profiling::Trace>, std::vector<profiling::Trace>> interleaved(const Config& a,
                                                                                    const Config& b,
                                                                                    int n) {
  std::pair<std::vector<profiling::Trace>, std::vector<profiling::Trace>> out;
  for (int i = 0; i < n; ++i) {
    out.first.push_back(record(a));
    out.second.push_back(record(b));
  }
  return out;
}

TEST(DeviceTimePhysics, OverlapIsNeverSlowerAndHidesCommunicationOnEveryProfile) {
  const auto profiles = profiling::hardware_profile_names();
  ASSERT_FALSE(profiles.empty());
  for (const char* strategy : {"ddp_bucketed", "zero2", "fsdp"}) {
    const auto [with, without] =
        interleaved(data_parallel(strategy, true), data_parallel(strategy, false), 5);
    for (const auto& hw : profiles) {
      // The profile's own compute speed: on a GPU profile tiny's step computes in about a
      // microsecond, so there is nothing to hide communication behind and both are equal; on
      // cpu-10GbE compute and communication are of one order and overlap must show. (Replaying
      // onto the GPU links with this CPU's compute is no test: what is exposed there is mostly
      // the ranks' arrival skew, which differs by more than what overlap hides.)
      const Timing a = best_of(with, hw), b = best_of(without, hw);
      std::printf("%s on %s: step %.4f ms with overlap, %.4f without; exposed %.4f / %.4f ms\n",
                  strategy, hw.c_str(), a.step_s * 1e3, b.step_s * 1e3, a.exposed_s * 1e3,
                  b.exposed_s * 1e3);
      // Two recordings of the same compute still differ by noise, the least of five steps of
      // five recordings included: up to 5 % on this shared machine, more than zero2's gain on
      // tiny (2-8 %), so a step is asked only not to be slower beyond that.
      EXPECT_LE(a.step_s, b.step_s * 1.05)
          << strategy << " on " << hw << ": overlap on " << a.step_s * 1e3 << " ms, off "
          << b.step_s * 1e3 << " ms";
      EXPECT_LE(a.exposed_s, b.exposed_s * 1.02)
          << strategy << " on " << hw << ": exposed communication with overlap "
          << a.exposed_s * 1e3 << " ms, without " << b.exposed_s * 1e3 << " ms";
      // The default lens of a CPU recording (cpu-10GbE: compute and communication of one order):
      // overlap must hide some of the communication.
      if (hw == analysis::default_lens_hardware(with.front())) {
        EXPECT_LT(a.exposed_s, b.exposed_s)
            << strategy << " on " << hw << ": exposed communication with overlap "
            << a.exposed_s * 1e3 << " ms, without " << b.exposed_s * 1e3 << " ms";
      }
    }
  }
}

// PyTorch's Reducer does about 0.6 ms a step more host work than ddp_bucketed on tiny (copying
// gradients into its buckets and back, its end-of-backward bookkeeping): real work, 15 % of a
// 4-sequence step of 4 ms. With 32 sequences a rank the compute the two share dominates (the
// Reducer's extra is then about 3 % of a step), as it does for any model worth distributing.
// With 16 it was 6 %, which left too little room for this shared machine's noise: one CI run
// in many measured 17 %.
TEST(DeviceTimePhysics, PyTorchDdpAndOursWithTheSameBucketsTakeTheSameTime) {
  auto config = [](const std::string& strategy) {
    Config c = data_parallel(strategy, true);
    c.micro_batch = 32;
    return c;
  };
  const auto [torch_ddp, ours] = interleaved(config("torch_ddp"), config("ddp_bucketed"), 5);
  for (const auto& hw : profiling::hardware_profile_names()) {
    const double a = best_of(torch_ddp, hw).step_s, b = best_of(ours, hw).step_s;
    EXPECT_NEAR(a / b, 1.0, 0.10) << hw << ": torch_ddp " << a * 1e3 << " ms, ddp_bucketed "
                                  << b * 1e3 << " ms";
  }
}

// A pipeline of `p` ranks with `v` stages each, two blocks a stage (or `layers` in all),
// `m` micro-batches, wide
// enough (256) and with micro-batches big enough (8 sequences) that compute dominates what a
// stage's host does between micro-batches (posting a send, a receive, freeing activations:
// 0.1-0.4 ms each, which a CPU "device" cannot run ahead of as a GPU's host does), and a
// vocabulary small enough (32) that the head does not make the last stage the slow one. On
// tiny's 64-wide, 2-sequence micro-batches those put 1F1B's bubble at 37-44 %.
Config equal_stages(const std::string& schedule, int p, int v, int m, int layers = 0) {
  nlohmann::json options = {{"micro_batches", m}, {"schedule", schedule}};
  if (v > 1) options["stages_per_rank"] = v;
  Config c = config_from_json(
      {{"preset", "tiny"},
       {"strategy", "pp"},
       {"world", p},
       {"steps", 4},
       {"micro_batch", 8},
       {"data", "synthetic"},
       {"model", {{"layers", layers > 0 ? layers : 2 * p * v}, {"d_model", 256}, {"vocab", 32}}},
       {"strategy_options", options}});
  finalize(c);
  return c;
}

// Each rank's bubble in device time: the least over the steps after the first of two
// recordings, pooled (a slow micro-batch anywhere on the critical path, this shared machine's
// noise, lengthens every stage's window, never shortens it).
std::map<int, double> least_bubble_by_rank(const Config& c) {
  std::map<int, std::vector<double>> by_rank;
  for (int recording = 0; recording < 2; ++recording) {
    const analysis::LensedTrace lensed = analysis::apply_lens(record(c), analysis::Lens{});
    EXPECT_TRUE(lensed.device_time) << lensed.note;
    for (const auto& s : profiling::step_metrics(lensed.trace)) {
      if (s.step > 0) by_rank[s.rank].push_back(s.bubble_fraction());
    }
  }
  std::map<int, double> least;
  for (auto& [rank, fractions] : by_rank)
    least[rank] = *std::min_element(fractions.begin(), fractions.end());
  return least;
}

TEST(DeviceTimePhysics, EqualPipelineStagesIdleTheTextbookBubble) {
  const int p = 4, m = 8;
  const double formula = double(p - 1) / (m + p - 1);
  for (const char* schedule : {"gpipe", "1f1b"}) {
    const auto bubbles = least_bubble_by_rank(equal_stages(schedule, p, 1, m));
    ASSERT_EQ(bubbles.size(), static_cast<size_t>(p)) << schedule;
    for (const auto& [rank, bubble] : bubbles) {
      std::printf("%s stage %d: bubble %.1f %% (formula %.1f %%)\n", schedule, rank, bubble * 100,
                  formula * 100);
      EXPECT_NEAR(bubble, formula, 0.05) << schedule << ", stage " << rank << ": bubble "
                                         << bubble * 100 << " %, formula " << formula * 100 << " %";
    }
  }
}

// Two stages per rank: interleaving idles less than 1F1B on the same ranks and micro-batches, near
// its formula (p-1)/(vm+p-1); splitting backward idles less again. The zero-bubble papers' figures
// (1/49 for InterleavedZeroBubble here, 0 for ZBV and DualPipeV) assume forward, input-gradient
// and weight-gradient passes of equal cost; ours are not (the weight pass is about 0.45 of a
// backward, the forward about half of one), so those schedules are held only to idling less than
// interleaving's formula plus the noise, and less than 1F1B.
TEST(DeviceTimePhysics, MultiStageSchedulesIdleLessThanOneFOneB) {
  const int p = 2, v = 2, m = 8;
  auto mean = [](const std::map<int, double>& by_rank) {
    double sum = 0;
    for (const auto& [rank, b] : by_rank) sum += b;
    return by_rank.empty() ? 1.0 : sum / double(by_rank.size());
  };
  // 1F1B over the same layers (four blocks a rank) and micro-batches.
  const double one_f_one_b = mean(least_bubble_by_rank(equal_stages("1f1b", p, 1, m, 2 * p * v)));
  const double interleaved_formula = double(p - 1) / (v * m + p - 1);
  std::printf("1f1b: bubble %.1f %% (formula %.1f %%)\n", one_f_one_b * 100,
              100.0 * (p - 1) / (m + p - 1));
  for (const char* schedule : {"interleaved-1f1b", "zero-bubble", "zbv", "dualpipev"}) {
    const auto bubbles = least_bubble_by_rank(equal_stages(schedule, p, v, m));
    ASSERT_EQ(bubbles.size(), static_cast<size_t>(p)) << schedule;
    const double formula = pipeline::bubble_formula(schedule, p, m, v);
    for (const auto& [rank, bubble] : bubbles) {
      std::printf("%s rank %d: bubble %.1f %% (formula %.1f %%)\n", schedule, rank, bubble * 100,
                  formula * 100);
      EXPECT_LT(bubble, interleaved_formula + 0.05)
          << schedule << ", rank " << rank << ": bubble " << bubble * 100 << " %";
    }
    EXPECT_LT(mean(bubbles), one_f_one_b) << schedule;
  }
}

}  // namespace
}  // namespace shardscope
