#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "app/cli/run_outputs.h"

namespace CLI {
class App;
}

namespace shardscope::cli {

class RunFlags;

// What `run` writes and how it concludes, beside the training flags (RunFlags).
struct RunOutputs {
  std::string config_file;
  OutputFiles files;
  double tolerance = -1;  // unset: kDefaultTolerance, or kBf16Tolerance with bf16 anywhere
  bool quiet = false;
  bool tolerance_given = false;
  std::vector<std::string> command;  // as typed, for the resume hint
};

// The outputs of a run, in the same words for run and collect: --json, --trace,
// --export-weights and --quiet.
void add_output_options(CLI::App& command, OutputFiles& files, bool& quiet);

// `shardscope run`: checks the config and the output paths (exit 2 naming the field or file),
// trains with progress lines, then writes the outputs and concludes (the resume hint included).
int run_command(RunFlags& flags, RunOutputs outputs, bool no_reference, std::ostream& out,
                std::ostream& err);

}  // namespace shardscope::cli
