#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace shardscope::cli {

// `shardscope report FILE`: reads a trace (native or Chrome JSON; for a trace directory, its
// trace.sst) and prints the per-rank compute / communication / overlap breakdown, per step and
// as Holistic Trace Analysis computes it, and the collectives' bandwidth and skew.
// Times are device time (each rank on a device of its own, see device_time_lens.h) unless
// `measured`. Returns the exit code (2 for a file that is not a readable trace).
struct ReportOptions {
  bool measured = false;
  std::string hardware;  // device time's profile; empty: the trace's default
  bool json = false;     // only the per-rank figures (trace_figures.h), machine-readable
};
// `paths`: one trace (a file or a folder), or several PyTorch profiler files of one job.
int report_command(const std::vector<std::string>& paths, const ReportOptions& options,
                   std::ostream& out, std::ostream& err);

}  // namespace shardscope::cli
