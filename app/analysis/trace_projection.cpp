#include "app/analysis/trace_projection.h"
#include "app/analysis/median.h"
#include "app/analysis/pass_pricing.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/state/recorded_config.h"
#include "engine/train/config_bounds.h"
#include "engine/train/device_speed.h"
#include "engine/train/strategy_registry.h"
#include "profiling/metrics/trace_metrics.h"
#include "profiling/projection/device_model.h"
#include "profiling/projection/memory_projection.h"
#include "profiling/projection/trace_replay.h"

namespace shardscope::analysis {
namespace {

// A dense transformer reaches about half of a GPU's peak in practice (MFU ~ 0.5).
constexpr double kAchievableFraction = 0.5;

// The recording with every piece of work at its median and devices ahead of their hosts
// (device_model.h), with ranks of the same work told apart by their strategy.
profiling::Trace same_work(const profiling::Trace& measured, const std::optional<Config>& config) {
  std::vector<int> model;
  const std::vector<int> classes = config ? work_classes(*config) : std::vector<int>{};
  for (size_t i = 0; i < measured.ranks.size(); ++i) {
    const int rank = measured.ranks[i].rank;
    const bool known = rank >= 0 && static_cast<size_t>(rank) < classes.size();
    model.push_back(known ? classes[rank] : -1 - static_cast<int>(i));
  }
  return profiling::same_work_same_time(measured, model);
}

}  // namespace

StepSummary summarise(const profiling::Trace& trace) {
  std::map<int, std::vector<profiling::StepMetrics>> by_step;
  for (const auto& m : profiling::step_metrics(trace)) by_step[m.step].push_back(m);
  if (by_step.size() > 1) by_step.erase(by_step.begin());
  std::vector<double> step, exposed, overlap, compute;
  for (const auto& [s, ranks] : by_step) {
    double slowest = 0, e = 0, o = 0, c = 0;
    for (const auto& m : ranks) {
      slowest = std::max(slowest, m.span_ns * 1e-9);
      e += m.exposed_comm_ns * 1e-9 / ranks.size();
      o += m.overlap_fraction() / ranks.size();
      c += m.compute_ns * 1e-9;
    }
    step.push_back(slowest);
    exposed.push_back(e);
    overlap.push_back(o);
    compute.push_back(c);
  }
  return {median(step), median(exposed), median(overlap), median(compute)};
}

namespace {

// The ratio of the measuring device's matmul rate to the target's, and where it comes from:
// recorded in the trace by the run; for another tool's GPU trace, the rate of the GPU it names as
// its profile measured it (never this machine's CPU, which would make a GPU's kernels 1e-4 as
// long), or 1 where no profile describes that GPU; else this machine's (calibrated, or measured
// now and cached), for a trace from before runs recorded it.
std::pair<double, std::string> calibrated_scale(const profiling::Trace& measured,
                                                const profiling::HardwareProfile& hw) {
  double here = measured.run.device_matmul_tflops;
  std::string whose = "the measuring device's";
  if (!(here > 0) && measured.run.device == "cuda") {
    const std::string& name = measured.run.device_name;
    const auto recording = profiling::profile_of_device(name);
    if (!recording || !(recording->matmul_tflops > 0)) {
      return {1.0, "compute as recorded: the recording GPU (" +
                       (name.empty() ? std::string("not named in the trace") : name) +
                       ") is none that a profile describes"};
    }
    here = recording->matmul_tflops;
    whose = "the recording GPU's (" + name + ", as " + recording->name + " measured it)";
  } else if (!(here > 0)) {
    try {
      here = profiling::load_hardware_profile("this-machine").peak_bf16_tflops;
    } catch (const std::exception&) {
      here = device_matmul_tflops("cpu");
    }
    whose = "this machine's";
  }
  if (hw.matmul_tflops > 0) {
    // Like against like: the same benchmark on the target's GPU. (Half the peak stood in for it
    // on the H100 until one was measured: a trace recorded on an H100 then projected onto 8xH100
    // 33 % slower than it ran; with the measured rate, within 1 %.)
    return {here / hw.matmul_tflops,
            whose + " matmul rate against the target's, measured the same way"};
  }
  return {here / (hw.peak_bf16_tflops * kAchievableFraction),
          whose + " matmul rate against half the target's peak"};
}

}  // namespace

double scaling_efficiency(const StepSummary& s, size_t ranks) {
  return s.step_s > 0 && ranks > 0 ? s.compute_s / (double(ranks) * s.step_s) : 0.0;
}

TraceProjection project_recorded_trace(const profiling::Trace& measured,
                                       const profiling::HardwareProfile& hw, double compute_scale,
                                       const std::string& precision) {
  TraceProjection t;
  t.compute_scale = compute_scale;
  t.scale_source = "given";
  if (t.compute_scale <= 0) {
    if (hw.name == "this-machine" || hw.compute_as_measured) {
      t.compute_scale = 1;
      t.scale_source = "compute as measured";
    } else {
      std::tie(t.compute_scale, t.scale_source) = calibrated_scale(measured, hw);
    }
  }
  profiling::ReplayOptions options;
  options.compute_scale = t.compute_scale;
  std::optional<Config> config = recorded_config(measured.run);
  if (config) {
    t.recorded_precision = config->strategy_options.precision;
    config->strategy_options.precision = precision;
  }
  // Priced kernel by kernel where the model knows the run's units (only when the scale is not
  // given, which is then the rest's).
  const auto price = [&](const profiling::Trace& replayed) {
    if (compute_scale > 0 || !config) return;
    if (const auto pricing = price_recorded_passes(replayed, *config, hw)) {
      options.span_scales = pricing->span_scales;
      t.compute_model = pricing->description;
      t.launch_bound = pricing->launch_bound();
      t.precision = precision;
      if (t.recorded_precision != precision)
        t.compute_model += " (the run itself computed in " + t.recorded_precision + ")";
    }
  };
  if (profiling::device_work_on_host_lanes(measured)) {
    options.device_ahead_of_host = true;
    const profiling::Trace replayed = same_work(measured, config);
    price(replayed);
    t.projected = profiling::replay_trace(replayed, hw, options);
    t.device_model =
        "one device per rank: the same work takes its median time, and each device runs ahead "
        "of its host";
  } else {
    t.projected = profiling::replay_trace(measured, hw, options);
    t.device_model = "the recorded device kernels";
  }
  t.measured_summary = summarise(measured);
  t.projected_summary = summarise(t.projected);
  const size_t n = measured.ranks.size();
  t.measured_efficiency = scaling_efficiency(t.measured_summary, n);
  t.projected_efficiency = scaling_efficiency(t.projected_summary, n);
  // A trace without our run description has no model, so no MFU.
  const std::optional<Config>& c = config;
  if (c && t.projected_summary.step_s > 0 && hw.peak_bf16_tflops > 0) {
    const profiling::ModelShape shape = model_shape(c->model);
    const double tokens = double(c->micro_batch) * c->world * c->grad_accum * shape.seq;
    const double flops = 6.0 * profiling::model_parameters(shape) * tokens;
    t.mfu = flops / (t.projected_summary.step_s * n * hw.peak_bf16_tflops * 1e12);
  }
  return t;
}

void require_priced_precision(const TraceProjection& t, const profiling::HardwareProfile& hw) {
  if (t.compute_model.empty())
    throw ConfigError("strategy_options.precision",
                      "this trace's compute is not priced kernel by kernel on " + hw.label() +
                          " but scaled (" + t.scale_source + "), so no precision applies to it");
}

}  // namespace shardscope::analysis
