#pragma once

namespace shardscope {

struct Config;

// Ranks each sequence is split over under context parallelism: strategy_options.context_parallel,
// or the whole world when it is not given. The world's other factor is data-parallel.
int context_parallel_degree(const Config& config);

}  // namespace shardscope
