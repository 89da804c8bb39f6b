#pragma once

#include <functional>

#include "engine/comm/comm.h"
#include "engine/launch/launcher.h"

namespace shardscope::test {

// Runs `body` on `world` rank threads with a traced Comm and fails the test if any rank threw.
LaunchReport run_on_ranks(int world, const std::function<void(RankContext&)>& body,
                          bool emulate_flat_collectives = false, bool stage_through_host = false,
                          const std::string& backend = "gloo");

}  // namespace shardscope::test
