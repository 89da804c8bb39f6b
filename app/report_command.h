#pragma once

#include <ostream>
#include <string>

namespace shardscope::cli {

// `shardscope report FILE`: reads a trace (native or Chrome JSON; for a trace directory, its
// trace.sst) and prints the per-rank compute / communication / overlap breakdown, per step and
// as Holistic Trace Analysis computes it, and the collectives' bandwidth and skew.
// `json`: only the per-rank figures (trace_figures.h), machine-readable, instead of the text.
// Returns the exit code (2 for a file that is not a readable trace).
int report_command(const std::string& path, std::ostream& out, std::ostream& err,
                   bool json = false);

}  // namespace shardscope::cli
