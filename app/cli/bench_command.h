#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "app/cli/cli_flags.h"

namespace shardscope::cli {

struct BenchOptions {
  std::string config_file;
  std::vector<std::string> strategies;  // empty: every registered strategy that can run
  // Pipeline schedules to compare: a row for each, for every strategy that runs a pipeline (the
  // others run once). Empty: the configured schedule; "all": every schedule there is.
  std::vector<std::string> schedules;
  bool quick = false;
  std::string format = "table";  // table | csv | json | markdown
  std::string out_dir;           // when set, each run's trace goes there
  // Step-by-step progress rewritten on one line (for a terminal); otherwise a line per run, so
  // that a log holds no carriage returns.
  bool live_progress = false;
  // How step time, overlap and exposed communication are timed: device time (each rank on a
  // device of its own, links of `hardware`; empty: the trace's default) unless `measured`.
  bool measured = false;
  std::string hardware;
};

// `shardscope bench`: the same model, data, seed and steps under each strategy, one after
// another, against one single-device reference, as one comparison table. Returns the exit code:
// 0 all ran, 1 some run failed (the others still complete), 2 bad input.
// What bench runs unless told otherwise (the help says these, not run's): world 4 on `small` for
// 6 steps, or `tiny` for 3 with --quick.
nlohmann::json bench_defaults(bool quick);

int bench_command(const RunFlags& flags, const BenchOptions& options, std::ostream& out,
                  std::ostream& err);

}  // namespace shardscope::cli
