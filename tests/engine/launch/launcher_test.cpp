#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/launch/launcher.h"

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

// The process's environment is set up before any rank thread starts. The first group of a
// process once called setenv on one rank's thread while the other rank's thread read the
// environment (oneDNN's getenv as the rank started): glibc's environment is not thread-safe, and
// that getenv crashed in CI (1 run in about 700 here, under load).
TEST(Launcher, TheEnvironmentIsSetBeforeAnyRankThreadStarts) {
  unsetenv("TORCH_FR_BUFFER_SIZE");
  LaunchSpec spec;
  spec.world = 2;
  spec.backend = "shm";
  std::string before_ranks = "(not called)";
  spec.watch_logs = [&](const std::vector<const profiling::RankEventLog*>* logs) {
    if (logs == nullptr) return;  // the call after the ranks ended
    const char* value = std::getenv("TORCH_FR_BUFFER_SIZE");
    before_ranks = value != nullptr ? value : "(unset)";
  };
  const LaunchReport report = launch_rank_threads(spec, [](RankContext&) {});
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(before_ranks, "0");
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

// Buffers handed to collectives are freed on the rank's thread (not a backend thread, where no
// rank's tracking would see the free), so a rank's memory does not creep up call after call.
TEST(Launcher, CollectiveBuffersAreReleasedWhereTheRankSeesIt) {
  LaunchSpec spec;
  spec.world = 2;
  auto report = launch_rank_threads(spec, [&](RankContext& ctx) {
    for (int i = 0; i < 40; ++i) {
      auto buffer = torch::full({512 * 1024}, 1.0f);  // 2 MiB
      ctx.comm->broadcast(buffer, i % 2);
      auto gathered = torch::empty({2 * 512 * 1024});
      ctx.comm->all_gather_into(gathered, buffer);
    }
  });
  ASSERT_TRUE(report.ok());
  for (int64_t peak : report.peak_allocated_bytes) {
    // A buffer and a gathered pair were alive together (6 MiB exactly where the backend let go
    // of every earlier round in time: 3 runs in 12 here).
    EXPECT_GE(peak, 6 << 20);
    // A backend thread may still hold a few rounds when the rank sweeps (bounded lag); 40
    // rounds of 6 MiB never released would be 240 MiB.
    EXPECT_LT(peak, 60 << 20);
  }
}

TEST(Launcher, ThreadsPerRankShareTheCores) {
  EXPECT_GE(default_threads_per_rank(64), 1);
  EXPECT_LE(default_threads_per_rank(2) * 2, std::max(2u, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

// Issue 38: a rank alone (world 1, the single-device reference) runs no collectives beside its
// compute, so it computes on every core; ranks that take turns leave one core to the
// collectives on a CPU.
TEST(LaunchSpec, ARankAloneComputesOnEveryCoreAndRanksTakingTurnsLeaveOne) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  Config alone;
  alone.world = 1;
  EXPECT_EQ(launch_spec(alone).threads_per_rank, cores);
  Config pair;
  pair.world = 2;
  EXPECT_EQ(launch_spec(pair).threads_per_rank, std::max(1, cores - 1));
  pair.threads_per_rank = 1;  // what the user asks for wins
  EXPECT_EQ(launch_spec(pair).threads_per_rank, 1);
}

}  // namespace
}  // namespace shardscope
