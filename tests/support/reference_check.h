#pragma once

#include <string>
#include <vector>

#include "engine/comm/step_traffic.h"
#include "engine/model/gpt_model.h"
#include "engine/train/config.h"
#include "engine/train/run.h"

namespace shardscope::test {

constexpr double kReferenceTolerance = 1e-5;  // ||w - ref|| / ||ref||, fp32

// The tiny GPT under `strategy`, 5 AdamW steps, 2 sequences per rank per micro-batch.
Config tiny_config(const std::string& strategy, int world, int grad_accum);

// Plain SGD with momentum 0.9 at lr 0.5 and no weight decay: a gradient scaled or averaged
// wrongly shows at once, and the momentum buffer is optimizer state a strategy must shard right.
void use_sgd_with_momentum(Config& config);

// Ranks agree bitwise, full weights match the single-device reference, losses track its losses,
// and training moved.
void expect_matches_reference(const RunSummary& summary);

// The toy models of the family's tests under `strategy`, each against the reference: frozen
// parameters (world 4, accumulation 2), tied embeddings (world 4, accumulation 2), and a
// parameter no rank uses (world 2, accumulation 2), which must end bitwise where it started.
void expect_toy_models_match_reference(const std::string& strategy);

// Every rank's micro-batches of every step, for tests/python/pytorch_reference.py's --batches:
// "inputs" and "targets", each [steps, world, accum, micro_batch, seq].
NamedTensors batches_of(const Config& config);

// Per step, over one rank's trace (see engine/comm/step_traffic.h).
std::vector<StepTraffic> traffic_per_step(const RankSummary& rank);

}  // namespace shardscope::test
