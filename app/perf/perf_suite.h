#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace at {
class Tensor;
}
namespace c10d {
class ProcessGroup;
}

namespace shardscope::perf {

// One line of the performance table: ours against a baseline measured side by side in the same
// run (interleaved, medians), as a ratio with the target it is held to.
struct PerfRow {
  std::string section;  // engine, tracing, collectives, ddp, startup, gui, scaling, host-ops
  std::string what;     // the case: "all_reduce 1 MiB, world 2", ...
  double ours = 0;
  double baseline = 0;  // 0: no baseline (an absolute figure)
  std::string unit;     // of ours and baseline
  double ratio = 0;     // the figure the target is about (see `target`)
  std::string target;   // e.g. "<= 1.05"; empty: informative
  bool met = true;
  std::string note;
};

struct PerfOptions {
  bool quick = false;                 // fewer repetitions and smaller cases (CI, smoke tests)
  std::vector<std::string> sections;  // empty: all
  std::function<void(const std::string&)> progress;  // one line per case as it starts
  // gui: also time opening this trace (a file, a folder, a job's profiler files) and drawing it.
  std::string trace;
  // engine: where both loops train, and in what precision: a GPU's per-kernel host cost.
  std::string device = "cpu";
  std::string precision = "fp32";
};

// Sections; each appends its rows.
void measure_engine_overhead(const PerfOptions& options, std::vector<PerfRow>& rows);
void measure_tracing_overhead(const PerfOptions& options, std::vector<PerfRow>& rows);
void measure_collectives(const PerfOptions& options, std::vector<PerfRow>& rows);
void measure_backends(const PerfOptions& options, std::vector<PerfRow>& rows);
// Bytes copied per second by memcpy between two 64 MiB buffers (best of several): the limit of
// any copy through shared memory.
double copy_bandwidth_gbps();
// The row that states it, for a section that sets busbw beside it.
PerfRow copy_bandwidth_row(const std::string& section, const std::string& what, double gbps);
// all_reduce of `full`, all_gather of `part` into `full`, or reduce_scatter of `full` into
// `part` on the raw process group, waited for (nccl-tests' buffers for size S = full).
void raw_collective(c10d::ProcessGroup& pg, const std::string& op, at::Tensor& full,
                    at::Tensor& part);
void measure_ddp_against_pytorch(const PerfOptions& options, std::vector<PerfRow>& rows);
void measure_startup(const PerfOptions& options, std::vector<PerfRow>& rows);
void measure_gui(const PerfOptions& options, std::vector<PerfRow>& rows);
void measure_scaling(const PerfOptions& options, std::vector<PerfRow>& rows);
void measure_host_ops(const PerfOptions& options, std::vector<PerfRow>& rows);

const std::vector<std::string>& section_names();
// Runs the chosen sections in order. Throws std::invalid_argument for an unknown section.
std::vector<PerfRow> run_suite(const PerfOptions& options);
// format: table | markdown | json.
void print_rows(const std::vector<PerfRow>& rows, const std::string& format, std::ostream& out);

// Shared by the sections.
double median(std::vector<double> values);
// A/B sections run an uncounted warm-up round first: in one process the first training run is
// faster than every later one (about 0.20 against 0.29 s per step of `small` here, with more
// page faults afterwards), so only rounds that start in the same state are compared.
std::string round_name(int round);  // "warm-up", "round 1", ...
// Interleaved A/B: the warm-up round, then `rounds` rounds each measuring `a` then `b`
// (seconds). Medians of each, and the median of the per-round ratios a / b.
struct Comparison {
  double a = 0, b = 0, ratio = 0;
};
Comparison interleaved(const PerfOptions& options, const std::string& label, int rounds,
                       const std::function<double()>& a, const std::function<double()>& b);
// The row of a step-time comparison (ms/step) held to ratio <= `limit`.
PerfRow step_time_row(const std::string& section, const std::string& what, const Comparison& c,
                      double limit);

// Median step time (seconds) of a run, its first step (warm-up) left out.
double median_step_seconds(const std::vector<double>& step_seconds);

}  // namespace shardscope::perf

namespace shardscope::perf {

// One training run for a measurement (no reference check): each step's time (slowest rank),
// the largest peak of any rank, its trace. Throws on bad config or a failed run.
struct MeasuredRun {
  std::vector<double> step_seconds;
  long long peak_bytes = 0;
  double wall_seconds = 0;
};
// `overrides`: config keys as JSON text, e.g. {"strategy":"ddp_bucketed","world":4}.
MeasuredRun measure_run(const std::string& overrides_json);
// The median step time of such a run, its first step left out.
double run_step_seconds(const std::string& overrides_json);

}  // namespace shardscope::perf
