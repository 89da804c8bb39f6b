#include "tests/support/rank_threads.h"

#include <gtest/gtest.h>

namespace shardscope::test {

LaunchReport run_on_ranks(int world, const std::function<void(RankContext&)>& body,
                          bool emulate_flat_collectives, bool stage_through_host,
                          const std::string& backend) {
  LaunchSpec spec;
  spec.backend = backend;
  spec.world = world;
  spec.threads_per_rank = 1;
  spec.timeout = std::chrono::seconds(60);
  spec.emulate_flat_collectives = emulate_flat_collectives;
  spec.stage_through_host = stage_through_host;
  LaunchReport report = launch_rank_threads(spec, body);
  for (const auto& f : report.failures) ADD_FAILURE() << "rank " << f.rank << ": " << f.message;
  return report;
}

}  // namespace shardscope::test
