#pragma once

#include <string>
#include <vector>

#include "profiling/trace/trace.h"

namespace shardscope::analysis {

// Reads the trace a path names, for `report` and the GUI's Open alike: a trace file (native or
// Chrome JSON, ours or another tool's), or a folder `run --trace DIR/` wrote (its trace.sst).
// Anything else throws profiling::TraceFormatError saying what the path is instead: missing,
// an empty file, a directory without a trace, a worker's --out folder, a file of neither format.
profiling::Trace open_trace_path(const std::string& path);
// One path as above, or several: the PyTorch profiler's files of one job, one a rank (each
// named; anything else among several is refused, naming it).
profiling::Trace open_trace_paths(const std::vector<std::string>& paths);

// The ranks an opened trace holds, for its header: "4 ranks", or, for a projected step that draws
// one rank of each distinct role, "1 ranks drawn of world 8 (the others repeat them)".
std::string ranks_text(const profiling::Trace& trace);

}  // namespace shardscope::analysis
