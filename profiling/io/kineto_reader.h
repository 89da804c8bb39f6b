#pragma once

#include <string>
#include <vector>

#include "profiling/trace/trace.h"

namespace shardscope::profiling {

// Whether `text` (a JSON document) is the PyTorch profiler's (Kineto's) trace of one process:
// its top level names schemaVersion, distributedInfo or deviceProperties before its events.
bool looks_like_kineto(const std::string& text);

// The Kineto traces of a multi-rank job, one file each (`export_chrome_trace`, or
// tensorboard_trace_handler's HOST_PID.*.pt.trace.json, gzipped or not), as one trace: each
// file is the rank its distributedInfo names (else a number in its file name, else its place in
// `paths`); the ranks share one time axis through baseTimeNanoseconds. Per rank:
// - lanes: the thread that runs ProfilerStep#N (else the busiest) is the host lane; the
//   collectives Gloo and NCCL run (gloo:OP, nccl:OP, NCCL kernels) are the comm lane; every
//   other CPU thread and every GPU stream its own lane;
// - categories: ProfilerStep#N a step, Optimizer.step a optimizer step, autograd's
//   evaluate_function backward, other top-level operators of the host thread forward, kernels
//   compute (NCCL's communication), memcpy and memset copies;
// - collectives carry their process group and sequence number (the collective's args where
//   PyTorch records them, else their order on the rank) and bytes, so ranks link as ours do;
// - [memory] events become the rank's allocated-memory line;
// - a kernel and the runtime call that launched it share their correlation id (Event::seq).
// Anything else is kept as a plain event. Throws TraceFormatError naming the file.
Trace read_kineto_files(const std::vector<std::string>& paths);
// One file whose bytes (`text`) were read already.
Trace read_kineto_text(const std::string& path, const std::string& text);

// The Kineto trace files (.json, .json.gz) directly in `directory`, by name; empty if none.
std::vector<std::string> kineto_files_in(const std::string& directory);

}  // namespace shardscope::profiling
