#pragma once

#include <cstdint>
#include <string>

namespace shardscope::profiling {

// Why `path` cannot be read as an input of at most `max_bytes`, or "" when it can. Only a regular
// file (symlinks followed) is read whole: a FIFO blocks its reader forever and /dev/zero never
// ends, so both are refused by what they are, before anything opens them. `what` names the kind
// of input in the message ("trace file", "config file").
std::string input_file_problem(const std::string& path, uint64_t max_bytes,
                               const std::string& what);

// The sane maximum sizes of our inputs: far above anything real, far below a machine's memory.
constexpr uint64_t kMaxTextInputBytes = uint64_t{64} << 20;  // configs, hardware profiles
constexpr uint64_t kMaxDataBytes = uint64_t{4} << 30;        // a training corpus
constexpr uint64_t kMaxTraceBytes = uint64_t{8} << 30;       // a trace file
constexpr uint64_t kMaxWeightsBytes = uint64_t{64} << 30;    // a weights file

}  // namespace shardscope::profiling
