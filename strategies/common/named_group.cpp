#include "strategies/common/named_group.h"

namespace shardscope {

Comm& named_group(RankContext& ctx, const std::string& kind, const std::vector<int>& ranks) {
  if (static_cast<int>(ranks.size()) == ctx.world) return *ctx.comm;
  std::string name = kind + "{";
  for (size_t i = 0; i < ranks.size(); ++i) name += (i ? "," : "") + std::to_string(ranks[i]);
  return ctx.subgroup(name + "}", ranks);
}

}  // namespace shardscope
