#include "profiling/record/memory_tracker.h"

#include <gtest/gtest.h>

#include <thread>

#include <ATen/ThreadLocalState.h>
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

TEST(RankMemoryTracker, ARetagMovesBytesInThePeakBreakdownToo) {
  RankMemoryTracker tracker(0, nullptr);
  RankMemoryTracker::ThreadScope scope(&tracker);
  auto at = [](const MemoryCategories& c, MemoryKind k) { return c[static_cast<int>(k)]; };
  auto grad = torch::empty({1 << 20}, torch::kUInt8);  // the peak: a temporary so far
  EXPECT_EQ(at(tracker.peak_categories(), MemoryKind::kTemporaries), 1 << 20);
  tracker.retag(grad.storage().data_ptr().get(), MemoryKind::kGradients);
  EXPECT_EQ(at(tracker.peak_categories(), MemoryKind::kGradients), 1 << 20);
  EXPECT_EQ(at(tracker.peak_categories(), MemoryKind::kTemporaries), 0);
  grad = torch::Tensor();
  auto later = torch::empty({1 << 10}, torch::kUInt8);  // after the peak: not in it
  tracker.retag(later.storage().data_ptr().get(), MemoryKind::kCommBuffers);
  EXPECT_EQ(at(tracker.peak_categories(), MemoryKind::kCommBuffers), 0);
  int64_t sum = 0;
  for (int64_t b : tracker.peak_categories()) sum += b;
  EXPECT_EQ(sum, tracker.peak_bytes());
}

TEST(RankMemoryTracker, OptimizerScratchFreedInItsStepIsATemporary) {
  RankMemoryTracker tracker(0, nullptr);
  RankMemoryTracker::ThreadScope scope(&tracker);
  tracker.set_phase(MemoryKind::kOptimizerState);
  auto state = torch::empty({1 << 20}, torch::kUInt8);
  auto scratch = torch::empty({1 << 20}, torch::kUInt8);
  scratch = torch::Tensor();
  tracker.set_phase(MemoryKind::kTemporaries);
  const auto peak = tracker.peak_categories();
  EXPECT_EQ(peak[static_cast<int>(MemoryKind::kOptimizerState)], 1 << 20);
  EXPECT_EQ(peak[static_cast<int>(MemoryKind::kTemporaries)], 1 << 20);
}

TEST(RankMemoryTracker, ABackendWorkersBlocksAreCommunicationBuffers) {
  RankMemoryTracker tracker(0, nullptr);
  RankMemoryTracker::ThreadScope scope(&tracker);
  tracker.set_phase(MemoryKind::kActivations);
  // A worker that inherited the rank's thread-local state, as a backend's thread does.
  at::ThreadLocalState inherited;
  std::thread worker([&] {
    at::ThreadLocalStateGuard guard(inherited);
    auto out = torch::empty({1 << 20}, torch::kUInt8);
    EXPECT_EQ(tracker.live_categories()[static_cast<int>(MemoryKind::kCommBuffers)], 1 << 20);
  });
  worker.join();
  EXPECT_EQ(tracker.live_categories()[static_cast<int>(MemoryKind::kActivations)], 0);
}

// What the device tracer asks on autograd's device thread to know whose kernels it launches:
// a thread running under a rank thread's thread-local state (as autograd runs each node of a
// rank's backward there) finds that rank's tracker; two ranks' states on one such thread, one
// after the other, each find their own; a thread with neither finds none.
TEST(RankMemoryTracker, AThreadUnderARanksStateFindsThatRank) {
  RankMemoryTracker zero(0, nullptr), one(1, nullptr);
  at::ThreadLocalState state_of_zero, state_of_one;
  std::thread a([&] {
    RankMemoryTracker::ThreadScope scope(&zero);
    state_of_zero = at::ThreadLocalState();
  });
  a.join();
  std::thread b([&] {
    RankMemoryTracker::ThreadScope scope(&one);
    state_of_one = at::ThreadLocalState();
  });
  b.join();
  std::thread device_thread([&] {
    EXPECT_EQ(RankMemoryTracker::current(), nullptr);
    {
      at::ThreadLocalStateGuard guard(state_of_one);
      ASSERT_NE(RankMemoryTracker::current(), nullptr);
      EXPECT_EQ(RankMemoryTracker::current()->rank(), 1);
    }
    {
      at::ThreadLocalStateGuard guard(state_of_zero);
      ASSERT_NE(RankMemoryTracker::current(), nullptr);
      EXPECT_EQ(RankMemoryTracker::current()->rank(), 0);
    }
    EXPECT_EQ(RankMemoryTracker::current(), nullptr);
  });
  device_thread.join();
}

}  // namespace
}  // namespace shardscope::profiling
