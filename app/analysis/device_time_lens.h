#pragma once

#include <string>

#include "profiling/trace/trace.h"

namespace shardscope::analysis {

// How a recorded run is shown. Ranks that shared one device contended for it (or took turns),
// so the wall clock of the recording is not what N devices would do. The default lens is device
// time: the run re-timed as if every rank had its own device, each computing as fast as the
// device that measured it, with collectives priced by a named hardware profile's links. The
// measured wall clock is one flag (or click) away.
struct Lens {
  bool measured = false;     // the recording as it happened
  std::string hardware;      // a profile name or path; empty: default_lens_hardware
  double compute_scale = 0;  // projected / measured compute time; 0: the profile's own rule
};

struct LensedTrace {
  profiling::Trace trace;  // the recording, or its replay
  bool device_time = false;
  std::string hardware;  // the profile used (device time)
  double compute_scale = 1;
  // What the picture is, for a header: "device time: 4 ranks on cpu-10GbE, compute x1 (as
  // measured)" or "measured wall clock".
  std::string title;
  // Why device time is not shown although asked for (a trace replay cannot follow, such as a
  // foreign Chrome trace), or a caveat about it (compute measured while ranks contended).
  std::string note;
};

// The profile device time uses when none is named: a CPU trace's ranks become CPU servers on
// 10 Gb Ethernet (cpu-10GbE), a GPU trace's ranks GPUs on NVSwitch (8xH100). Both are common
// systems where a preset's communication and compute are of the same order.
std::string default_lens_hardware(const profiling::Trace& measured);
// The same for runs on `device` ("cpu", "cuda:0"), before they have recorded anything.
std::string default_lens_hardware(const std::string& device);

// Never throws for a trace it cannot replay: it falls back to the measured trace, says why in
// `note`. Throws std::runtime_error for a hardware profile that cannot be read.
LensedTrace apply_lens(const profiling::Trace& measured, const Lens& lens);

}  // namespace shardscope::analysis
