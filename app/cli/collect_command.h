#pragma once

#include <iosfwd>
#include <string>

#include "app/cli/run_outputs.h"

namespace shardscope::cli {

struct CollectOptions {
  std::string dir;         // the workers' --out folder
  OutputFiles outputs;     // --json, --trace, --export-weights: as run writes them
  bool reference = false;  // --reference: train the single-device reference here and compare
  double tolerance = -1;   // < 0: the default of `run` for this config
  bool quiet = false;
};

// `shardscope collect DIR`: the run whose ranks torchrun or a scheduler started (`shardscope
// worker --out DIR`), summarised as `run` summarises its own, with the same outputs and exit
// codes: 2 for a folder that is not a finished run's (missing, unreadable, a rank's file missing
// or unfinished), naming the file; 1 for a run a rank failed; 3 when ranks or the reference
// disagree.
int collect_command(const CollectOptions& options, std::ostream& out, std::ostream& err);

}  // namespace shardscope::cli
