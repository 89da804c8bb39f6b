#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "app/analysis/run_attributes.h"
#include "profiling/trace/trace.h"

namespace shardscope::analysis {

// One run as a row of the comparison (`shardscope bench`, the GUI's Compare window).
struct ComparisonRow {
  std::string strategy;
  bool ok = false;
  std::string failure;  // or why it was skipped
  bool skipped = false;
  // The run carries no result: a trace recorded by another tool (PyTorch's profiler), which
  // shows as a trace, not as a failed run.
  bool no_result = false;
  RunAttributes attributes;  // what sets it apart from other runs
  std::string layout;        // how a bench row was laid out when it differs from the others
  int world = 0;
  std::string mode, device, backend;
  int64_t peak_max = 0, peak_min = 0;  // allocated bytes per rank
  bool replicated = true, ranks_agree = false;
  bool has_reference = false;
  double deviation = 0, max_abs = 0;  // from the single-device reference
  double final_loss = 0, step_s = 0;
  double step_min_s = 0, step_max_s = 0;  // the spread over the steps after the first
  int64_t bytes_per_step = 0;             // handed to collectives, per rank (the run's count)
  // What crosses the wire per rank per step, by each collective's algorithm as nccl-tests'
  // busbw counts it (an all_reduce of S moves 2(n-1)/n S; an all_gather or reduce_scatter of
  // S, (n-1)/n S; a send its bytes): ZeRO-1 and -2 move what DDP moves.
  int64_t wire_bytes_per_step = 0;
  double overlap = 0, exposed_ms = 0;
  double overlap_worst = 0;       // the rank that overlaps least (its median over steps)
  std::string lens = "measured";  // how step_s, overlap and exposed were timed
};

// Everything from the trace: its run description (config and the result a run attaches) and
// the step metrics of its events. `lens` names how its times were taken (run_attributes.h).
ComparisonRow comparison_row(const profiling::Trace& trace, const std::string& lens = "measured");
// Takes step time and its spread, overlap and exposed communication from `timed` (the run in
// another lens, such as device time): per step, the slowest rank. The spread keeps at least the
// step-to-step variation `row` measured (relative to its median): device time gives each piece
// of work its median, which leaves steps alike, and that variation is the run's noise.
void time_row(const profiling::Trace& timed, ComparisonRow& row);

// The columns: strategy and world, then the attributes `shown` (distinguishing_attributes of
// the rows), then the figures.
std::vector<std::string> comparison_headers(const std::vector<std::string>& shown = {});
// The memory change column compares `row` with the torch_ddp run among `rows` of the same model
// and global batch; without one it says why it is blank.
std::vector<std::string> comparison_cells(const ComparisonRow& row,
                                          const std::vector<ComparisonRow>& rows,
                                          const std::vector<std::string>& shown = {});
// The torch_ddp row `row` compares with (same model and global batch), or null.
const ComparisonRow* torch_ddp_baseline(const ComparisonRow& row,
                                        const std::vector<ComparisonRow>& rows);
// What differs among the rows (run_attributes.h).
std::vector<std::string> distinguishing_columns(const std::vector<ComparisonRow>& rows);
// format: table | csv | json | markdown.
void print_comparison(const std::vector<ComparisonRow>& rows, const std::string& format,
                      std::ostream& out);

}  // namespace shardscope::analysis
