#pragma once

#include "engine/train/config.h"
#include "profiling/projection/memory_projection.h"
#include "profiling/trace/trace.h"

namespace shardscope {

// How a run of `config` lays its model out, in the memory formula's terms (ZeRO stage, data /
// tensor / pipeline degrees, the sequences of one micro-batch, precision). Knowledge of what
// each strategy shards lives here, not in the views that draw the formula.
profiling::TrainingLayout memory_layout(const Config& config);

// The formula's bytes for `rank`: parameters, gradients and optimizer state from the ZeRO
// paper, activations from what our GPT saves (profiling/memory_projection) for the pipeline
// stage and tensor shard the rank holds. Communication buffers and temporaries are what the
// implementation chooses, not what the paper's formulas say: they are 0 here.
profiling::MemoryCategories memory_formula(const Config& config, int rank);

}  // namespace shardscope
