#pragma once

#include <string>
#include <vector>

#include "profiling/trace/run_record.h"

namespace shardscope::analysis {

// What a student changes between two runs, read from a trace's run description: the attributes
// that name a run ("zero2 w4, overlap off") and decide which runs compare ("vs torch_ddp" only
// against the same model and global batch).
struct RunAttributes {
  bool known = false;  // false: a trace without our run description (a foreign Chrome trace)
  std::string strategy;
  int world = 0;
  std::string preset;     // the preset's name, "+ custom shape" when the model was changed
  std::string overlap;    // on | off: communication overlapped with compute (overlap, prefetch)
  std::string schedule;   // 1f1b | gpipe; empty for runs without pipeline stages
  std::string bucket;     // "default" or the cap, "0.1 MB"
  std::string precision;  // fp32 | bf16
  // How the figures were timed: "measured" (wall clock), or "device time on <hardware>".
  std::string lens = "measured";
  std::string model;  // the whole model shape, for "the same model" (not shown)
  int global_batch = 0;
};

// `run`: a trace's run record. `lens` names the timing the figures beside it use.
RunAttributes run_attributes(const profiling::RunRecord& run, const std::string& lens = "measured");

// The attributes a label can show, in label order.
const std::vector<std::string>& attribute_names();
// An attribute's column header: its name, unless a figure column has it ("overlap option": the
// setting, beside "overlap", the fraction measured).
std::string attribute_header(const std::string& name);
// One attribute's value as a table cell ("off", "0.1 MB", "gpipe"), empty when not applicable.
std::string attribute_value(const RunAttributes& run, const std::string& name);
// The attributes (of attribute_names(), strategy and world aside) whose values differ among
// `runs` (those with a run description): what sets them apart.
std::vector<std::string> distinguishing_attributes(const std::vector<RunAttributes>& runs);
// "zero2 w4, small, overlap off, bucket 0.1 MB": strategy and world always, then `shown`.
std::string run_label(const RunAttributes& run, const std::vector<std::string>& shown);
// Labels for runs loaded together, each showing only what differs among them.
std::vector<std::string> run_labels(const std::vector<RunAttributes>& runs);

// Why `run` is not compared with `baseline` (another model, another global batch), or empty
// when they compare.
std::string why_not_comparable(const RunAttributes& run, const RunAttributes& baseline);

}  // namespace shardscope::analysis
