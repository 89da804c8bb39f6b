#pragma once

#include <iosfwd>
#include <string>

#include "engine/train/config.h"
#include "engine/train/run.h"

namespace shardscope::cli {

// What `run` prints about a run, shared by `collect`, which prints the same for a run whose ranks
// were started by torchrun or a scheduler, and by the worker's own progress lines.

// The run's strategy, world, model and batch, before it trains.
void print_run_header(const Config& config, std::ostream& out);

// The step table: its heading, then one line per step as each finishes.
void print_step_heading(std::ostream& out);
void print_step(const StepRecord& record, std::ostream& out);

// Per rank checksums, weight sums and memory, whether ranks agree, and the reference check (or
// `no_reference`, why there is none).
void print_run_results(const RunSummary& summary, std::ostream& out,
                       const char* no_reference = "skipped (--no-reference)");

// The reference check's tolerance when none is given: wider when bf16 is used anywhere.
double default_tolerance(const Config& config);

// The exit code of a finished run's checks (ranks agree, reference within `tolerance`), with
// the reason on `err` when one fails.
int check_run_results(const RunSummary& summary, double tolerance, std::ostream& err);

// How a run that has ended is told: its failure, its stop by a signal, or its results and checks.
// Returns the exit code.
struct Conclusion {
  int steps = 0;           // the steps the run was asked for
  double tolerance = 0.0;  // of the reference check
  // The command that continues the run from its checkpoint; empty: none is offered (collect).
  std::string resume_command;
  const char* no_reference = "skipped (--no-reference)";
};
int conclude_run(const RunSummary& summary, const Conclusion& how, std::ostream& out,
                 std::ostream& err);

// "SIGINT (Ctrl-C)", "SIGTERM", "signal N".
std::string signal_name(int signal_number);

// printf-style formatting of one number.
std::string format_number(const char* fmt, double value);

}  // namespace shardscope::cli
