#pragma once

#include <optional>
#include <string>

#include "engine/train/config.h"

namespace shardscope {

// A comparison (`shardscope bench`) runs every strategy on one model and world. A model-parallel
// strategy whose own dimension takes the whole world can ask for more pipeline stages than the
// model has blocks (pp on `tiny`: 4 stages for 2 blocks). This gives it the layout that fits:
// the most pipeline stages the blocks allow that divide the world, data parallelism taking the
// rest (pp degree 2 x dp 2 on `tiny` at world 4), so that model and global batch stay those of
// the other rows. Returns the finalized configuration and, in `how`, the layout ("dp2 x pp2");
// nullopt when `config` finalizes as it is or no smaller pipeline degree helps.
std::optional<Config> fit_layout_to_model(const Config& config, std::string* how);

}  // namespace shardscope
