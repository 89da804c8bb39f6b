#pragma once

#include <optional>
#include <string>

#include "profiling/projection/hardware_profile.h"
#include "profiling/trace/trace.h"

namespace shardscope::analysis {

// Medians over steps (the first left out when there are more) of the slowest rank's step, and
// the mean over ranks of exposed communication, overlap and compute.
struct StepSummary {
  double step_s = 0, exposed_s = 0, overlap = 0, compute_s = 0;
};
StepSummary summarise(const profiling::Trace& trace);
// Scaling efficiency against one GPU, which would do every rank's compute itself: compute over
// `ranks` x the step.
double scaling_efficiency(const StepSummary& s, size_t ranks);

// A recorded trace replayed onto a hardware profile, with the figures `shardscope project` and
// the GUI's what-if panel show side by side.
struct TraceProjection {
  double compute_scale = 1;
  std::string scale_source;
  // How the devices are modelled, for titles (profiling/projection/steady_device.h).
  std::string device_model;
  profiling::Trace projected;
  StepSummary measured_summary, projected_summary;
  double measured_efficiency = 0, projected_efficiency = 0;  // scaling efficiency vs one GPU
  std::optional<double> mfu;                                 // when the trace names its model
  // When the compute was priced kernel by kernel on the profile's GPU (pass_pricing.h): what
  // was priced, and whether a micro-batch is bound by the host's launches. Empty: compute is the
  // recorded time x compute_scale.
  std::string compute_model;
  bool launch_bound = false;
  // The precision the compute was priced in (when compute_model is not empty), and the one the
  // run recorded (empty for a trace without our run description).
  std::string precision, recorded_precision;
};

// compute_scale <= 0: 1 for a profile whose compute is "as measured"; else, for a run of our GPT
// recorded on a CPU (its device work on the host lanes) whose ranks each run whole units
// (data-parallel, tp) onto a profile with per-kernel GPU rates,
// each forward, backward and optimizer span priced kernel by kernel (pass_pricing.h), and
// the rest of the host's time scaled by the measuring device's matmul rate (the trace records
// it) against the target's (its profile's matmul_tflops, measured the same way on such a GPU),
// or half its peak where none was measured. A compute_scale given scales everything.
// `precision` is what the priced kernels compute in: bf16 (as GPUs train, `project`'s default)
// or fp32, whatever the run recorded; fp32 where the profile cannot price it throws ConfigError
// (pass_pricing.h's check_priced_precision). Where nothing is priced kernel by kernel (a scale
// given, a GPU's recording, no run description, compute "as measured"), `precision` is unused
// and compute_model stays empty: callers that were asked for one say so
// (require_priced_precision).
TraceProjection project_recorded_trace(const profiling::Trace& measured,
                                       const profiling::HardwareProfile& hw, double compute_scale,
                                       const std::string& precision = "bf16");

// For a caller asked for a precision: throws ConfigError naming strategy_options.precision when
// `t` priced nothing kernel by kernel on `hw`, so that no precision applied to it.
void require_priced_precision(const TraceProjection& t, const profiling::HardwareProfile& hw);

}  // namespace shardscope::analysis
