#pragma once

#include <string>
#include <vector>

#include "engine/launch/rank_context.h"

namespace shardscope {

class Comm;

// The traced process group of `ranks` (world ranks, in group order), named by its kind and members
// ("tp{0,1}", "cp{2,3}") so that the trace tells groups apart; the whole world is the world group.
// Only members call it, each with the same kind and ranks.
Comm& named_group(RankContext& ctx, const std::string& kind, const std::vector<int>& ranks);

}  // namespace shardscope
