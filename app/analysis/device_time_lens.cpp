#include "app/analysis/device_time_lens.h"

#include <cstdio>
#include <optional>
#include <stdexcept>

#include "app/analysis/trace_projection.h"
#include "engine/state/recorded_config.h"
#include "profiling/projection/hardware_profile.h"

namespace shardscope::analysis {

std::string default_lens_hardware(const std::string& device) {
  return device.rfind("cuda", 0) == 0 ? "8xH100" : "cpu-10GbE";
}

std::string default_lens_hardware(const profiling::Trace& measured) {
  return default_lens_hardware(measured.run.device);
}

LensedTrace apply_lens(const profiling::Trace& measured, const Lens& lens) {
  LensedTrace out;
  if (lens.measured) {
    out.trace = measured;
    out.title = "measured wall clock";
    return out;
  }
  if (measured.run.mode == profiling::kProfilerMode) {
    // Someone's own job, read from the PyTorch profiler's files: its times are what ran.
    out.trace = measured;
    out.title = "as recorded by the PyTorch profiler";
    return out;
  }
  if (measured.run.projected) {
    // Already a projection (project --out): its times are the target's, not a recording's.
    out.trace = measured;
    out.title = "projected onto " + measured.run.projected->hardware;
    return out;
  }
  const std::string name = lens.hardware.empty() ? default_lens_hardware(measured) : lens.hardware;
  // A profile asked for is read or refused (the caller names --hardware); the default, missing
  // or broken (a binary moved away from its assets), leaves the recording's own times, said.
  std::optional<profiling::HardwareProfile> asked;
  if (!lens.hardware.empty()) asked = profiling::load_hardware_profile(name);
  try {
    const profiling::HardwareProfile hw = asked ? *asked : profiling::load_hardware_profile(name);
    TraceProjection t = project_recorded_trace(measured, hw, lens.compute_scale);
    out.trace = std::move(t.projected);
    out.device_time = true;
    out.hardware = hw.name;
    out.compute_scale = t.compute_scale;
    char title[384];
    std::snprintf(title, sizeof(title), "device time: %zu ranks on %s, compute x%.3g (%s); %s",
                  measured.ranks.size(), hw.name.c_str(), t.compute_scale, t.scale_source.c_str(),
                  t.device_model.c_str());
    out.title = title;
  } catch (const std::exception& e) {
    out.trace = measured;
    out.title = "measured wall clock";
    out.note = std::string("device time unavailable (") + e.what() + "): showing the recording";
    return out;
  }
  const std::optional<Config> config = recorded_config(measured.run);
  if (measured.ranks.size() > 1 && config && config->contended) {
    out.note =
        "recorded with --contended: each rank's compute was slowed by the others sharing "
        "its device, and device time keeps that";
  } else if (measured.ranks.size() > 1 && config && config->takes_turns() &&
             measured.run.device.rfind("cuda", 0) == 0) {
    // Measured on an H200 (docs/running-on-a-gpu.md): the drain did not bring a rank's turn
    // back to a lone rank's step, so a drained trace is not yet one of devices of their own.
    out.note = measured.run.turns_drain_device
                   ? "ranks shared one GPU, taking turns: on an H200 a rank's backward took about "
                     "twice a lone rank's whole step, drained or not (a copy stalls it; cause "
                     "not found), so compute can read long"
                   : "ranks shared one GPU, not drained between turns (recorded before "
                     "2026-11-27): their kernels may have run at once with other ranks', so "
                     "their durations can read long";
  }
  return out;
}

}  // namespace shardscope::analysis
