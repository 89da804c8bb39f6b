#pragma once

#include <string>
#include <vector>

#include "app/analysis/configuration_projection.h"

namespace shardscope::analysis {

// One layout the search tried, and what it projects.
struct SearchedLayout {
  int tp = 1, pp = 1, dp = 1, stages_per_rank = 1, micro_batches = 1;
  int64_t micro_batch_sequences = 1;
  std::string schedule;
  bool recompute = false;          // full: every block again in backward
  bool selective = false;          // selective: each block's attention again in backward
  std::string data_parallel_sync;  // the data-parallel dimension's sync, or the sharded strategy
  double step_s = 0, mfu = 0, peak_bytes = 0;
  bool fits = true;
  std::string label() const;
};

// Every layout of `config`'s model and global batch over the GPUs of `hw` (with `nodes`): tensor
// degrees within a node, pipeline degrees, 1F1B or interleaved 1F1B with 2 or 3 stages a rank,
// micro-batches of 1, 2 or 4 sequences, with and without full recompute (and, when the model's
// attention is unfused, with selective recompute instead), DDP or ZeRO-1 over the
// data-parallel dimension, and without tensor or pipeline groups a data-parallel strategy of
// each ZeRO stage (DDP, ZeRO-1, 2 and 3); sequence parallelism wherever there is a tensor group.
// Each is
// projected (project_configuration); those that fit in memory come first, fastest first.
// `refused`, if given, receives why the first layout that could not be projected was refused
// (all of them, when none is returned: a mixture of experts in a tensor-parallel block, ...).
std::vector<SearchedLayout> search_layouts(const Config& config,
                                           const profiling::HardwareProfile& hw, int nodes,
                                           std::string* refused = nullptr);

std::string search_text(const std::vector<SearchedLayout>& layouts, size_t shown);

}  // namespace shardscope::analysis
