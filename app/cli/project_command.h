#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "engine/train/config.h"

namespace shardscope::cli {

// The precision a GPU projection prices (bf16 mixed precision, as GPUs train): `project`'s
// default, where `run`'s is fp32, the CPU's.
inline constexpr const char* kProjectedPrecision = "bf16";

struct ProjectOptions {
  std::string hardware = "8xH100";
  std::string collective;  // all_reduce, all_gather, ...: project one collective
  std::string bytes;       // its size ("1GiB"); empty: a sweep of sizes
  int ranks = 0;           // when ranks_given; else every GPU of the profile
  bool ranks_given = false;
  std::string algorithm = "auto";
  bool memory = false;    // project per-GPU memory for the model in `config`
  int micro_batch = 1;    // sequences per micro-batch for the memory projection
  int micro_batches = 0;  // pipeline micro-batches (0: the pipeline degree)
  bool fp32 = false;      // fp32 Adam instead of bf16 mixed precision
  // A recorded trace to replay onto the hardware: a file, a folder, or one job's profiler files.
  std::vector<std::string> traces;
  double compute_scale = 0;  // projected / measured compute time (0: from the profiles)
  std::string out;           // where to write the projected trace
  bool json = false;         // the figures as JSON instead of the table
  int nodes = 0;             // nodes of the profile (0: the profile's own)
  bool search = false;       // list the fastest layouts of the model that fit
  bool configured = false;   // some run flag was given: a configuration to project
  // The config keys the run flags gave ("world", "strategy_options.precision"): with a trace,
  // only the precision its compute is priced in applies.
  std::vector<std::string> run_keys;
};

// `shardscope project`: what a collective, or a model's memory under each layout, costs on a
// hardware profile (assets/hardware). Returns the exit code (2 for bad input).
int project_command(const ProjectOptions& options, const Config& config, std::ostream& out,
                    std::ostream& err);

}  // namespace shardscope::cli
