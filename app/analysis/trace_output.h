#pragma once

#include <string>

#include "profiling/trace/trace.h"

namespace shardscope::analysis {

// Whether `--trace TARGET` names a directory: it ends in '/' or is an existing directory.
bool is_trace_directory(const std::string& target);

// Why `--trace TARGET` cannot be written (checked before the run, so a long run does not end
// in a failed write); empty when it can.
std::string trace_target_problem(const std::string& target);

// Writes the run's trace to `--trace TARGET` and returns what was written, for the user:
// - a directory: per rank DIR/rank-R.json in Kineto's shape (Holistic Trace Analysis,
//   TensorBoard's profiler view), plus DIR/trace.sst, the native trace for `report`, the GUI and
//   `project` (`shardscope report DIR` reads it), and per rank DIR/rank-R.et, a Chakra execution
//   trace for ASTRA-sim (profiling/io/chakra_trace.h; where built with protobuf). Rank files of
//   an earlier, wider run of ours are removed (HTA reads every .json in the directory as one
//   run); files of other names, and rank files that do not name shardscope near their start,
//   are never touched.
// - FILE.json: Chrome trace JSON; any other name: the native format.
std::string write_trace(const profiling::Trace& trace, const std::string& target);

// The native trace inside a trace directory.
std::string native_trace_in(const std::string& directory);

// Whether write_trace into a directory writes (or may remove) a file of this name: trace.sst,
// rank-R.json, rank-R.et.
bool written_into_trace_directory(const std::string& file_name);

}  // namespace shardscope::analysis
