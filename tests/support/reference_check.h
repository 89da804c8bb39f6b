#pragma once

#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/run.h"

namespace shardscope::test {

constexpr double kReferenceTolerance = 1e-5;  // ||w - ref|| / ||ref||, fp32

// The tiny GPT under `strategy`, 5 AdamW steps, 2 sequences per rank per micro-batch.
Config tiny_config(const std::string& strategy, int world, int grad_accum);

// Ranks agree bitwise, full weights match the single-device reference, losses track its losses,
// and training moved.
void expect_matches_reference(const RunSummary& summary);

// Per step, over one rank's trace: how many async all-reduces were issued and the bytes of each
// kind of collective. A step ends at the trainer's all_gather_into of loss and time (the only
// collective in double precision).
struct StepTraffic {
  int all_reduces = 0;
  int64_t all_reduce_bytes = 0;
  int64_t all_gather_bytes = 0;      // each rank's contribution (its shard)
  int64_t reduce_scatter_bytes = 0;  // each rank's input (the whole flat vector)
  bool operator==(const StepTraffic& other) const {
    return all_reduces == other.all_reduces && all_reduce_bytes == other.all_reduce_bytes &&
           all_gather_bytes == other.all_gather_bytes &&
           reduce_scatter_bytes == other.reduce_scatter_bytes;
  }
};
std::vector<StepTraffic> traffic_per_step(const RankSummary& rank);

}  // namespace shardscope::test
