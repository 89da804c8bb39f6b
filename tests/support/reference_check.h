#pragma once

#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/run.h"
#include "engine/step_traffic.h"

namespace shardscope::test {

constexpr double kReferenceTolerance = 1e-5;  // ||w - ref|| / ||ref||, fp32

// The tiny GPT under `strategy`, 5 AdamW steps, 2 sequences per rank per micro-batch.
Config tiny_config(const std::string& strategy, int world, int grad_accum);

// Ranks agree bitwise, full weights match the single-device reference, losses track its losses,
// and training moved.
void expect_matches_reference(const RunSummary& summary);

// Per step, over one rank's trace (see engine/step_traffic.h).
std::vector<StepTraffic> traffic_per_step(const RankSummary& rank);

}  // namespace shardscope::test
