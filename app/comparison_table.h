#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "profiling/trace.h"

namespace shardscope::cli {

// One run as a row of the comparison (`shardscope bench`, the GUI's Compare window).
struct ComparisonRow {
  std::string strategy;
  bool ok = false;
  std::string failure;  // or why it was skipped
  bool skipped = false;
  int world = 0;
  std::string mode, device, backend;
  int64_t peak_max = 0, peak_min = 0;  // allocated bytes per rank
  bool replicated = true, ranks_agree = false;
  bool has_reference = false;
  double deviation = 0, max_abs = 0;  // from the single-device reference
  double final_loss = 0, step_s = 0;
  int64_t bytes_per_step = 0;
  double overlap = 0, exposed_ms = 0;
  std::string lens = "measured";  // how step_s, overlap and exposed were timed
};

// Everything from the trace: its run description (config and the result a run attaches) and
// the step metrics of its events.
ComparisonRow comparison_row(const profiling::Trace& trace);

std::vector<std::string> comparison_headers();
// `baseline` (torch_ddp's row, when there is one) gives the memory change column.
std::vector<std::string> comparison_cells(const ComparisonRow& row, const ComparisonRow* baseline);
const ComparisonRow* torch_ddp_row(const std::vector<ComparisonRow>& rows);
// format: table | csv | json | markdown.
void print_comparison(const std::vector<ComparisonRow>& rows, const std::string& format,
                      std::ostream& out);

}  // namespace shardscope::cli
