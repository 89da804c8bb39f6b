#pragma once

namespace shardscope {

struct Config;

// Ranks a mixture's experts are spread over under expert parallelism:
// strategy_options.expert_parallel, or the whole world when it is not given. The world's other
// factor holds copies of the same experts.
int expert_parallel_degree(const Config& config);

}  // namespace shardscope
