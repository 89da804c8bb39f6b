// Taking turns (the default; --contended turns it off): ranks sharing a device, as threads or as
// processes, take turns on it, so no two ranks ever compute at once, training is unchanged, and
// the time spent waiting for a turn is marked for projection.
#include "engine/launch/device_turns.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "engine/state/weights.h"
#include "engine/train/run.h"
#include "profiling/metrics/trace_metrics.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

using profiling::Intervals;
using profiling::merged;

// `x` without `y` (both merged).
Intervals minus(const Intervals& x, const Intervals& y) {
  Intervals out;
  for (auto [a, b] : x) {
    for (const auto& [c, d] : y) {
      if (d <= a || c >= b) continue;
      if (c > a) out.push_back({a, c});
      a = std::max(a, d);
      if (a >= b) break;
    }
    if (a < b) out.push_back({a, b});
  }
  return out;
}

// When a rank computed: its forward and backward spans, less the time it waited inside them
// (for communication, or for its turn).
Intervals computing(const profiling::RankTrace& rank) {
  Intervals spans, waits;
  for (const auto& e : rank.events) {
    if (e.lane != profiling::kHostLane) continue;
    if (e.category == profiling::Category::kForward ||
        e.category == profiling::Category::kBackward) {
      spans.push_back({e.t0_ns, e.t1_ns});
    }
    if (e.category == profiling::Category::kWait) waits.push_back({e.t0_ns, e.t1_ns});
  }
  return minus(merged(spans), merged(waits));
}

TEST(SerializeCompute, RanksNeverComputeAtOnceAndTrainTheSame) {
  // torch_ddp: PyTorch's Reducer waits at backward's end outside our Comm; it must not keep the
  // device from the peers it waits for.
  for (const char* strategy : {"ddp_bucketed", "fsdp", "tp", "torch_ddp"}) {
    Config c = test::tiny_config(strategy, 2, 2);
    c.reference = false;
    c.contended = true;
    RunSummary together = run_training(c);
    c.contended = false;
    RunSummary in_turns = run_training(c);
    ASSERT_TRUE(in_turns.ok) << strategy << ": " << in_turns.failure;
    EXPECT_EQ(weights_checksum(in_turns.weights), weights_checksum(together.weights)) << strategy;

    const Intervals rank0 = computing(in_turns.trace.ranks[0]);
    const Intervals rank1 = computing(in_turns.trace.ranks[1]);
    ASSERT_FALSE(rank0.empty());
    ASSERT_FALSE(rank1.empty());
    EXPECT_EQ(profiling::intersection_length(rank0, rank1), 0)
        << strategy << ": both ranks computed at once";
    int turn_waits = 0;
    for (const auto& r : in_turns.trace.ranks) {
      for (const auto& e : r.events) {
        if (in_turns.trace.str(e.name) == DeviceTurns::kWaitName) ++turn_waits;
      }
    }
    EXPECT_GT(turn_waits, 0) << strategy;
  }
}

TEST(SerializeCompute, RankProcessesOnOneHostTakeTurnsToo) {
  setenv("SHARDSCOPE_WORKER", SHARDSCOPE_BINARY, 1);
  Config c = test::tiny_config("ddp_bucketed", 2, 2);
  c.reference = false;
  RunSummary threads = run_training(c);
  c.mode = "processes";
  RunSummary processes = run_training(c);
  ASSERT_TRUE(processes.ok) << processes.failure;
  EXPECT_EQ(weights_checksum(processes.weights), weights_checksum(threads.weights));
  ASSERT_EQ(processes.trace.ranks.size(), 2u);
  const Intervals rank0 = computing(processes.trace.ranks[0]);
  const Intervals rank1 = computing(processes.trace.ranks[1]);
  ASSERT_FALSE(rank0.empty());
  ASSERT_FALSE(rank1.empty());
  EXPECT_EQ(profiling::intersection_length(rank0, rank1), 0) << "two processes computed at once";
}

// Giving the turn up first waits for what the holder's device still runs (on a GPU, its
// queued kernels: DeviceTurns::drain_before_release), so the next rank's compute never starts
// beside it: a rank waiting for the turn gets it only once the drain has returned.
TEST(SerializeCompute, TheTurnPassesOnOnlyOnceTheHoldersDeviceIsDrained) {
  std::atomic<int> drains{0};
  std::atomic<bool> drained{false};
  DeviceTurns::instance().drain_before_release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    drained = true;
    ++drains;
  });
  std::atomic<bool> next_saw_drained{false};
  std::thread next;
  {
    DeviceTurns::Scope turn(true);
    next = std::thread([&] {
      DeviceTurns::Scope mine(true);  // waits for the turn
      next_saw_drained = drained.load();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }  // gives the turn up: drains first
  next.join();
  DeviceTurns::instance().drain_before_release(nullptr);
  EXPECT_TRUE(next_saw_drained);
  EXPECT_EQ(drains.load(), 2);  // each scope's end gave the turn up once
}

}  // namespace
}  // namespace shardscope
