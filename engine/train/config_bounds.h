#pragma once

#include <cstdint>

#include "profiling/projection/memory_projection.h"

namespace shardscope {

struct Config;
struct ModelConfig;

// A pipeline's micro-batches a step: Megatron's largest published pipelines ran 512 (Korthikanti
// et al. 2022, the 1T row); 65,536 leaves room and bounds the schedule a projection builds.
constexpr int kMostMicroBatches = 65536;
// Accumulation passes a step, which a projection walks one by one: half a million project in a
// second; 2e9 ran out of memory.
constexpr int kMostAccumulation = 1 << 20;

// Sizes are bounded before anything is allocated: a batch or model that no memory here could
// hold, or a thread count that would only thrash, is refused with the field to change instead of
// growing until the machine kills the run. Throws ConfigError.
void check_config_bounds(const Config& config);

// The model's shape as the memory formulas take it.
profiling::ModelShape model_shape(const ModelConfig& model);

// The memory this process may use: the machine's, or its cgroup's limit when lower.
int64_t usable_memory_bytes();

// Bytes the run's ranks (and the reference) would hold at their peak, estimated in fp32 from the
// memory formulas of profiling/memory_projection (replicated weights, Adam): a bound, not a
// prediction.
double estimated_run_bytes(const Config& config);

}  // namespace shardscope
