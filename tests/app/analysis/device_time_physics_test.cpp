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
  double compute_s = 0;  // of the busiest rank in the fastest step
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
    t.compute_s = std::max(t.compute_s, m.compute_ns * 1e-9);
    ++ranks[m.step];
  }
  Timing best{1e30, 1e30};
  for (auto& [step, t] : steps) {
    if (t.step_s < best.step_s) best.compute_s = t.compute_s;
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

// Two runs recorded in turn, n of each (after a warm-up pair): this machine's speed drifts by tens
// of percent over seconds (a shared host), and recording one run's n before the other's would
// compare the drift.
std::pair<std::vector<profiling::Trace>, std::vector<profiling::Trace>> interleaved(const Config& a,
                                                                                    const Config& b,
                                                                                    int n) {
  std::pair<std::vector<profiling::Trace>, std::vector<profiling::Trace>> out;
  // One uncounted pair first: the first training in a process runs faster than every later one
  // (docs/performance.md), and best_of would pick it. A CI run once recorded torch_ddp's first at
  // 12.7 ms against 15.4 for ours, where they agree within 4 % otherwise.
  record(a);
  record(b);
  for (int i = 0; i < n; ++i) {
    out.first.push_back(record(a));
    out.second.push_back(record(b));
  }
  return out;
}

// The exposed communication of each rank: its median over the steps after the first.
std::map<int, double> exposed_by_rank(const profiling::Trace& measured, const std::string& hw) {
  analysis::Lens lens;
  lens.hardware = hw;
  const analysis::LensedTrace lensed = analysis::apply_lens(measured, lens);
  EXPECT_TRUE(lensed.device_time) << lensed.note;
  std::map<int, std::vector<double>> by_rank;
  for (const auto& m : profiling::step_metrics(lensed.trace)) {
    if (m.step > 0) by_rank[m.rank].push_back(m.exposed_comm_ns * 1e-9);
  }
  std::map<int, double> out;
  for (auto& [rank, values] : by_rank) {
    std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
    out[rank] = values[values.size() / 2];
  }
  return out;
}

// Identical work takes identical time: data-parallel ranks run the same model on sequences of
// the same shape, so in device time their compute in one step agrees, however busy the machine
// that recorded them was.
TEST(DeviceTimePhysics, DataParallelRanksOfOneStepComputeAlike) {
  for (const char* strategy : {"ddp_bucketed", "torch_ddp", "zero2", "fsdp"}) {
    const profiling::Trace measured = record(data_parallel(strategy, true));
    const analysis::LensedTrace lensed = analysis::apply_lens(measured, analysis::Lens{});
    ASSERT_TRUE(lensed.device_time) << lensed.note;
    std::map<int, std::pair<double, double>> range;  // step -> least, most compute
    for (const auto& m : profiling::step_metrics(lensed.trace)) {
      auto [at, fresh] = range.try_emplace(m.step, 1e30, 0.0);
      at->second.first = std::min(at->second.first, double(m.compute_ns));
      at->second.second = std::max(at->second.second, double(m.compute_ns));
    }
    ASSERT_GE(range.size(), 2u) << strategy;
    for (const auto& [step, r] : range) {
      std::printf("%s step %d: compute %.3f .. %.3f ms over the ranks\n", strategy, step,
                  r.first * 1e-6, r.second * 1e-6);
      EXPECT_LE(r.second, r.first * 1.02) << strategy << ", step " << step << ": ranks compute "
                                          << r.first * 1e-6 << " to " << r.second * 1e-6 << " ms";
    }
  }
}

TEST(DeviceTimePhysics, OverlapIsNeverSlowerAndHidesCommunicationOnEveryProfile) {
  const auto profiles = profiling::hardware_profile_names();
  ASSERT_FALSE(profiles.empty());
  for (const char* strategy : {"ddp_bucketed", "zero2", "fsdp"}) {
    const profiling::Trace with = record(data_parallel(strategy, true));
    const profiling::Trace without = record(data_parallel(strategy, false));
    for (const auto& hw : profiles) {
      // The profile's own compute speed: on a GPU profile tiny's step computes in about a
      // microsecond, so there is nothing to hide communication behind and both are equal; on
      // cpu-10GbE compute and communication are of one order and overlap must show.
      const Timing a = on(with, hw, 0), b = on(without, hw, 0);
      std::printf("%s on %s: step %.4f ms with overlap, %.4f without; exposed %.4f / %.4f ms\n",
                  strategy, hw.c_str(), a.step_s * 1e3, b.step_s * 1e3, a.exposed_s * 1e3,
                  b.exposed_s * 1e3);
      // What overlap changes is the step's time beside its compute: never more with it on.
      EXPECT_LE(a.step_s - a.compute_s, (b.step_s - b.compute_s) * 1.01 + 1e-9)
          << strategy << " on " << hw << ": beside compute, overlap on "
          << (a.step_s - a.compute_s) * 1e3 << " ms, off " << (b.step_s - b.compute_s) * 1e3
          << " ms";
      // The whole step, allowing for what the two recordings' compute differs by: it can differ
      // by 18 % when the machine is busy (zero2 on cpu-10GbE once computed 4.15 ms with overlap
      // and 3.50 without, under ctest -j2), which says nothing about overlap.
      const double more_compute = std::max(0.0, a.compute_s - b.compute_s);
      EXPECT_LE(a.step_s, (b.step_s + more_compute) * 1.01)
          << strategy << " on " << hw << ": overlap on " << a.step_s * 1e3 << " ms a step for "
          << a.compute_s * 1e3 << " ms of compute, off " << b.step_s * 1e3 << " ms for "
          << b.compute_s * 1e3 << " ms";
      const auto exposed_with = exposed_by_rank(with, hw),
                 exposed_without = exposed_by_rank(without, hw);
      for (const auto& [rank, e] : exposed_with) {
        EXPECT_LE(e, exposed_without.at(rank) * 1.01 + 1e-6)
            << strategy << " on " << hw << ", rank " << rank
            << ": exposed communication with overlap " << e * 1e3 << " ms, without "
            << exposed_without.at(rank) * 1e3 << " ms";
      }
      // The default lens of a CPU recording (cpu-10GbE: compute and communication of one order):
      // overlap must hide some of the communication.
      if (hw == analysis::default_lens_hardware(with)) {
        EXPECT_LT(a.exposed_s, b.exposed_s)
            << strategy << " on " << hw << ": exposed communication with overlap "
            << a.exposed_s * 1e3 << " ms, without " << b.exposed_s * 1e3 << " ms";
      }
    }
  }
}

// With the same buckets, PyTorch's DDP and ours launch the same all_reduces at the same points of
// backward, so in device time they expose the same communication on every profile, and where a
// profile prices compute by its GPU model (every GPU profile) their whole steps agree. On a
// profile that takes compute as measured (cpu-10GbE) the rest of a step is this machine's wall
// time, which varies by 15-30 % between recordings of the same run even when idle (tiny, 32
// sequences a rank: 16.5 to 23.3 ms a step), more than the Reducer's real extra host work (about
// 0.6 ms a step, copying gradients into its buckets and back); comparing those steps compared
// this machine's noise, and failed one CI run in a few.
TEST(DeviceTimePhysics, PyTorchDdpAndOursWithTheSameBucketsTakeTheSameTime) {
  auto config = [](const std::string& strategy) {
    Config c = data_parallel(strategy, true);
    c.micro_batch = 32;
    return c;
  };
  const auto [torch_ddp, ours] = interleaved(config("torch_ddp"), config("ddp_bucketed"), 3);
  for (const auto& hw : profiling::hardware_profile_names()) {
    const Timing a = best_of(torch_ddp, hw), b = best_of(ours, hw);
    std::printf("%s: torch_ddp %.4f ms a step, %.4f exposed; ddp_bucketed %.4f, %.4f exposed\n",
                hw.c_str(), a.step_s * 1e3, a.exposed_s * 1e3, b.step_s * 1e3, b.exposed_s * 1e3);
    EXPECT_GT(b.exposed_s, 0) << hw << ": nothing exposed, nothing compared";
    EXPECT_NEAR(a.exposed_s, b.exposed_s, 0.02 * b.exposed_s + 1e-7)
        << hw << ": exposed communication, torch_ddp " << a.exposed_s * 1e3 << " ms, ddp_bucketed "
        << b.exposed_s * 1e3 << " ms";
    if (profiling::load_hardware_profile(hw).compute_as_measured) continue;
    EXPECT_NEAR(a.step_s / b.step_s, 1.0, 0.10) << hw << ": torch_ddp " << a.step_s * 1e3
                                                << " ms, ddp_bucketed " << b.step_s * 1e3 << " ms";
  }
}

// A pipeline of `p` ranks with `v` stages each, two blocks a stage (or `layers` in all),
// `m` micro-batches, wide
// enough (256) and with micro-batches big enough (8 sequences) that compute dominates what a
// stage's host does between micro-batches (posting a send, a receive, freeing activations:
// 0.1-0.4 ms each, which a CPU "device" cannot run ahead of as a GPU's host does), and a
// vocabulary small enough (32) that the head does not make the last stage the slow one. On
// tiny's 64-wide, 2-sequence micro-batches those put 1F1B's bubble at 37-44 %.
Config equal_stages(const std::string& schedule, int p, int v, int m, int layers = 0,
                    int steps = 4) {
  nlohmann::json options = {{"micro_batches", m}, {"schedule", schedule}};
  if (v > 1) options["stages_per_rank"] = v;
  Config c = config_from_json(
      {{"preset", "tiny"},
       {"strategy", "pp"},
       {"world", p},
       {"steps", steps},
       {"micro_batch", 8},
       {"data", "synthetic"},
       {"model", {{"layers", layers > 0 ? layers : 2 * p * v}, {"d_model", 256}, {"vocab", 32}}},
       {"strategy_options", options}});
  finalize(c);
  return c;
}

// Each rank's bubble in device time, its median over the steps after the first. The
// links are NVLink's (8xH100) and compute as measured, so that a send costs microseconds: the
// formula counts no transfer time, which on cpu-10GbE adds 1-2 points (6 hops of 0.27 ms a step).
// `compute_spread`, if given, gets the most over the least of the ranks' median compute.
std::map<int, double> bubble_by_rank(const Config& c, double* compute_spread = nullptr) {
  analysis::Lens lens;
  lens.hardware = "8xH100";
  lens.compute_scale = 1;
  const analysis::LensedTrace lensed = analysis::apply_lens(record(c), lens);
  EXPECT_TRUE(lensed.device_time) << lensed.note;
  std::map<int, std::vector<double>> by_rank, compute_by_rank;
  for (const auto& s : profiling::step_metrics(lensed.trace)) {
    if (s.step == 0) continue;
    by_rank[s.rank].push_back(s.bubble_fraction());
    compute_by_rank[s.rank].push_back(double(s.micro_compute_ns));
  }
  const auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  std::map<int, double> out;
  double most = 0, least = 0;
  for (auto& [rank, fractions] : by_rank) {
    out[rank] = median(fractions);
    const double compute = median(compute_by_rank[rank]);
    most = std::max(most, compute);
    least = least == 0 ? compute : std::min(least, compute);
  }
  if (compute_spread) *compute_spread = least > 0 ? most / least : 0;
  return out;
}

double mean_of(const std::map<int, double>& by_rank) {
  double sum = 0;
  for (const auto& [rank, b] : by_rank) sum += b;
  return by_rank.empty() ? 1.0 : sum / double(by_rank.size());
}

TEST(DeviceTimePhysics, EqualPipelineStagesIdleTheTextbookBubble) {
  const int p = 4, m = 8;
  const double formula = double(p - 1) / (m + p - 1);
  std::map<std::string, double> mean;
  for (const char* schedule : {"gpipe", "1f1b"}) {
    // Medians over seven steps: with three, one stage of a fresh-clone CI run measured 35.8 %
    // where five runs here gave 26-30 %.
    // The formula is for stages of equal work. Recorded on this machine they measure within a
    // few per cent of each other; once, in a fresh-clone CI run, one stage measured 30 % more
    // compute than the rest through the whole recording (its bubble 22.7 %, the others' 37-41 %)
    // on a machine that lent it less. Such a recording does not have the formula's premise, so
    // it is recorded again, up to three times, and the physics is held to the recording whose
    // stages came nearest equal: a GPipe run whose stages differed by 13.1 % (accepted when 15 %
    // was enough) put one stage 7.0 points off the formula in a fresh-clone CI run, where runs
    // here differ by 1-4.5 %.
    double spread = 0;
    std::map<int, double> bubbles;
    for (int attempt = 0; attempt < 4; ++attempt) {
      double this_spread = 0;
      auto these = bubble_by_rank(equal_stages(schedule, p, 1, m, 0, 8), &this_spread);
      std::printf("%s: the stages' median compute differs by %.1f %%\n", schedule,
                  (this_spread - 1) * 100);
      if (attempt == 0 || this_spread < spread) spread = this_spread, bubbles = std::move(these);
      if (spread <= 1.06) break;
    }
    EXPECT_LE(spread, 1.15) << schedule << ": equal stages measured unequal compute";
    ASSERT_EQ(bubbles.size(), static_cast<size_t>(p)) << schedule;
    for (const auto& [rank, bubble] : bubbles) {
      std::printf("%s stage %d: bubble %.1f %% (formula %.1f %%)\n", schedule, rank, bubble * 100,
                  formula * 100);
      // "Equal" stages are equal in blocks, not quite in work: the first embeds, the last
      // computes the loss and sends nothing, and a stage that computes 3 % less idles about 2
      // points more. That is the stage's own, and stays. 1F1B's last stage, whose spans no other
      // stage shares, measured 27-34 % over six runs beside a busy core, so a stage is held to 7
      // points, and the busiest stage to the 3 (below).
      EXPECT_NEAR(bubble, formula, 0.07) << schedule << ", stage " << rank << ": bubble "
                                         << bubble * 100 << " %, formula " << formula * 100 << " %";
    }
    mean[schedule] = mean_of(bubbles);
    // The formula is for equal stages; ours differ by their ends (above), and a stage with less
    // work idles more by its own lack of it. The busiest stage is the one the formula describes:
    // it idles (p - 1) / (m + p - 1) of the step. The mean over stages is higher by the others'
    // shortfall, and more so for GPipe, whose flush pays the slowest forward stage and the
    // slowest backward stage one after the other (five runs here: GPipe's mean 28.3-30.3 %, its
    // busiest stage 25.9-28.8 %; 1F1B's mean 27.3-28.0 %).
    double busiest = 1;
    for (const auto& [rank, bubble] : bubbles) busiest = std::min(busiest, bubble);
    EXPECT_NEAR(busiest, formula, 0.03) << schedule << ": the busiest stage idles " << busiest * 100
                                        << " %, formula " << formula * 100 << " %";
    EXPECT_LT(mean[schedule], formula + 0.05)
        << schedule << ": the stages idle " << mean[schedule] * 100 << " % on average";
  }
  // The same stages and micro-batches in another order: 1F1B frees activations sooner, and idles
  // no more (two recordings, so within what their medians differ by).
  EXPECT_LE(mean["1f1b"], mean["gpipe"] + 0.01)
      << "1f1b idles " << mean["1f1b"] * 100 << " %, gpipe " << mean["gpipe"] * 100 << " %";
}

// Two stages per rank: interleaving idles less than 1F1B on the same ranks and micro-batches, near
// its formula (p-1)/(vm+p-1); splitting backward idles less again. The zero-bubble papers' figures
// (1/49 for InterleavedZeroBubble here, 0 for ZBV and DualPipeV) assume forward, input-gradient
// and weight-gradient passes of equal cost; ours are not (the weight pass is about 0.45 of a
// backward, the forward about half of one), so those schedules are held only to idling less than
// interleaving's formula plus the noise, and less than 1F1B.
TEST(DeviceTimePhysics, MultiStageSchedulesIdleLessThanOneFOneB) {
  const int p = 2, v = 2, m = 8;
  // 1F1B over the same layers (four blocks a rank) and micro-batches.
  const double one_f_one_b = mean_of(bubble_by_rank(equal_stages("1f1b", p, 1, m, 2 * p * v)));
  const double interleaved_formula = double(p - 1) / (v * m + p - 1);
  std::printf("1f1b: bubble %.1f %% (formula %.1f %%)\n", one_f_one_b * 100,
              100.0 * (p - 1) / (m + p - 1));
  for (const char* schedule : {"interleaved-1f1b", "zero-bubble", "zbv", "dualpipev"}) {
    const auto bubbles = bubble_by_rank(equal_stages(schedule, p, v, m));
    ASSERT_EQ(bubbles.size(), static_cast<size_t>(p)) << schedule;
    const double formula = pipeline::bubble_formula(schedule, p, m, v);
    for (const auto& [rank, bubble] : bubbles) {
      std::printf("%s rank %d: bubble %.1f %% (formula %.1f %%)\n", schedule, rank, bubble * 100,
                  formula * 100);
      // A rank's own stages scatter as in the single-stage test above (7 points beside a busy
      // core: interleaved-1f1b's rank 1 measured 11.3 % once under ctest -j2); the mean is held
      // to 3.
      EXPECT_LT(bubble, interleaved_formula + 0.07)
          << schedule << ", rank " << rank << ": bubble " << bubble * 100 << " %";
    }
    EXPECT_LT(mean_of(bubbles), interleaved_formula + 0.03) << schedule;
    EXPECT_LT(mean_of(bubbles), one_f_one_b) << schedule;
  }
}

}  // namespace
}  // namespace shardscope
