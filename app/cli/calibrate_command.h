#pragma once

#include <ostream>
#include <string>

namespace shardscope::cli {

struct CalibrateOptions {
  std::string out;  // default: this-machine.json in the hardware profile directory
  bool quick = false;
};

// `shardscope calibrate`: measures this machine (Gloo all_reduce over rank threads at two world
// sizes and two buffer sizes, an fp32 matmul rate, the memory) and writes the "this-machine"
// hardware profile whose model reproduces those measurements. Returns the exit code.
int calibrate_command(const CalibrateOptions& options, std::ostream& out, std::ostream& err);

}  // namespace shardscope::cli
