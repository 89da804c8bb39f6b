#include "profiling/memory_tracker.h"

#include <gtest/gtest.h>

#include <thread>

#include <torch/torch.h>

namespace shardscope::profiling {
namespace {

TEST(RankMemoryTracker, AttributesAllocationsOfKnownSizesExactly) {
  RankMemoryTracker tracker(0, nullptr);
  std::thread rank([&] {
    RankMemoryTracker::ThreadScope scope(&tracker);
    auto a = torch::empty({1000}, torch::kFloat);  // 4000 bytes
    EXPECT_EQ(tracker.live_bytes(), 4000);
    auto b = torch::empty({12345}, torch::kUInt8);
    EXPECT_EQ(tracker.live_bytes(), 16345);
    a = torch::Tensor();
    EXPECT_EQ(tracker.live_bytes(), 12345);
  });
  rank.join();
  EXPECT_EQ(tracker.peak_bytes(), 16345);
}

TEST(RankMemoryTracker, AFreeOnAnotherRanksThreadGoesToTheOwner) {
  RankMemoryTracker zero(0, nullptr), one(1, nullptr);
  torch::Tensor handed_over;
  std::thread a([&] {
    RankMemoryTracker::ThreadScope scope(&zero);
    handed_over = torch::empty({256}, torch::kDouble);  // 2048 bytes
  });
  a.join();
  EXPECT_EQ(zero.live_bytes(), 2048);
  std::thread b([&] {
    RankMemoryTracker::ThreadScope scope(&one);
    auto mine = torch::empty({10}, torch::kFloat);
    handed_over = torch::Tensor();  // freed here, but it was rank 0's
    EXPECT_EQ(one.live_bytes(), 40);
  });
  b.join();
  EXPECT_EQ(zero.live_bytes(), 0);
  EXPECT_EQ(one.live_bytes(), 0);
  EXPECT_EQ(one.peak_bytes(), 40);
}

TEST(RankMemoryTracker, SamplesLiveBytesIntoTheRankLog) {
  RankEventLog log(0);
  RankMemoryTracker tracker(0, &log);
  std::thread rank([&] {
    RankMemoryTracker::ThreadScope scope(&tracker);
    auto big = torch::empty({3 << 20}, torch::kUInt8);  // 3 MiB: one sample
    auto small = torch::empty({100}, torch::kUInt8);    // below the step: none
  });
  rank.join();
  auto samples = log.memory();
  ASSERT_GE(samples.size(), 2u);  // up to 3 MiB, and back to 0 when freed
  EXPECT_EQ(samples.front().kind, MemoryKind::kAllocated);
  EXPECT_EQ(samples.front().bytes, 3 << 20);
  EXPECT_EQ(samples.back().bytes, 0);
}

TEST(RankMemoryTracker, NoScopeNoAttribution) {
  RankMemoryTracker tracker(0, nullptr);
  auto t = torch::empty({1000});
  EXPECT_EQ(tracker.live_bytes(), 0);
}

}  // namespace
}  // namespace shardscope::profiling
