#include <gtest/gtest.h>

#include <torch/torch.h>

#include "engine/comm.h"
#include "engine/launcher.h"

namespace shardscope {
namespace {

TEST(Launcher, EveryRankRunsWithItsOwnIdentity) {
  LaunchSpec spec;
  spec.world = 4;
  std::vector<int> seen(4, -1);
  auto report = launch_rank_threads(spec, [&](RankContext& ctx) {
    seen[ctx.rank] = ctx.comm->rank();
    EXPECT_EQ(ctx.world, 4);
    EXPECT_EQ(ctx.comm->size(), 4);
  });
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Launcher, ARankThatThrowsStopsTheOthersAndIsNamed) {
  // Rank 1 throws while its peers are about to block in a collective it will never join: they
  // must fail (not hang) and the report must blame rank 1. ctest's timeout catches a hang.
  LaunchSpec spec;
  spec.world = 3;
  spec.timeout = std::chrono::seconds(600);  // beyond ctest's limit: teardown, not timeout
  auto report = launch_rank_threads(spec, [&](RankContext& ctx) {
    auto t = torch::ones({4});
    ctx.comm->all_reduce(t);
    if (ctx.rank == 1) throw std::runtime_error("boom in rank 1");
    for (int i = 0; i < 3; ++i) ctx.comm->all_reduce(t);
  });
  ASSERT_FALSE(report.ok());
  ASSERT_NE(report.root_failure(), nullptr);
  EXPECT_EQ(report.root_failure()->rank, 1);
  EXPECT_EQ(report.root_failure()->message, "boom in rank 1");
  EXPECT_EQ(report.failures.size(), 3u) << "the peers blocked on rank 1 should fail too";
}

TEST(Launcher, ThreadsPerRankShareTheCores) {
  EXPECT_GE(default_threads_per_rank(64), 1);
  EXPECT_LE(default_threads_per_rank(2) * 2, std::max(2u, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace shardscope
