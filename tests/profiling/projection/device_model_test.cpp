// Device time's model of one device per rank: the same work takes the same time (the median of
// its occurrences on ranks of one work class), and a device runs ahead of its host.
#include "profiling/projection/device_model.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "profiling/projection/collective_model.h"
#include "profiling/projection/hardware_profile.h"
#include "profiling/projection/trace_replay.h"
#include "tests/support/hand_trace.h"

namespace shardscope::profiling {
namespace {

constexpr int64_t kMs = 1000000;

std::vector<const Event*> named(const Trace& t, int rank, const std::string& name) {
  std::vector<const Event*> out;
  for (const auto& e : t.ranks[rank].events) {
    if (t.str(e.name) == name) out.push_back(&e);
  }
  return out;
}

// Two ranks, three steps of one forward each, timed differently by a busy machine: rank 0's
// forwards 10, 11 and 30 ms, rank 1's 20, 12 and 13 ms, with 1 ms between steps.
Trace noisy_forwards() {
  HandTrace b(2);
  const int64_t lengths[2][3] = {{10, 11, 30}, {20, 12, 13}};
  for (int r = 0; r < 2; ++r) {
    int64_t t = 0;
    for (int step = 0; step < 3; ++step) {
      const int64_t end = t + lengths[r][step] * kMs;
      b.span(r, "step", Category::kStep, t, end, step);
      b.span(r, "forward blocks.0", Category::kForward, t, end, step);
      t = end + kMs;
    }
  }
  return b.build();
}

TEST(DeviceModel, RanksOfOneWorkClassTakeTheMedianOfAll) {
  const Trace t = same_work_same_time(noisy_forwards(), {0, 0});
  // The six occurrences: 10 11 12 13 20 30; the median (upper middle) is 13.
  for (int r = 0; r < 2; ++r) {
    for (const Event* e : named(t, r, "forward blocks.0"))
      EXPECT_EQ(e->t1_ns - e->t0_ns, 13 * kMs) << "rank " << r;
  }
}

TEST(DeviceModel, RanksOfDifferentClassesKeepTheirOwnWork) {
  const Trace t = same_work_same_time(noisy_forwards(), {0, 1});
  for (const Event* e : named(t, 0, "forward blocks.0")) EXPECT_EQ(e->t1_ns - e->t0_ns, 11 * kMs);
  for (const Event* e : named(t, 1, "forward blocks.0")) EXPECT_EQ(e->t1_ns - e->t0_ns, 13 * kMs);
  // No classes given: every rank its own.
  const Trace own = same_work_same_time(noisy_forwards(), {});
  for (const Event* e : named(own, 1, "forward blocks.0")) EXPECT_EQ(e->t1_ns - e->t0_ns, 13 * kMs);
}

// A stage whose thread a busy machine preempted all through its run: every forward took 30 ms of
// wall time, 10 of them off its core (measured by the recording). The median of alike pieces
// cannot see that (all are slow); what the thread ran can.
TEST(DeviceModel, TimeOffTheCoreIsTakenOut) {
  HandTrace b(1);
  for (int step = 0; step < 3; ++step) {
    const int64_t t = step * 31 * kMs;
    b.span(0, "forward blocks.0", Category::kForward, t, t + 30 * kMs, step, 10000);
  }
  const Trace t = same_work_same_time(b.build(), {0});
  for (const Event* e : named(t, 0, "forward blocks.0")) {
    EXPECT_EQ(e->t1_ns - e->t0_ns, 20 * kMs);
    EXPECT_EQ(e->off_cpu_us, 0) << "taken out: the retimed span says so no more";
  }
  // A hostile file's negative figure is no time: the forward keeps its 30 ms.
  HandTrace hostile(1);
  hostile.span(0, "forward blocks.0", Category::kForward, 0, 30 * kMs, 0, -10000);
  EXPECT_EQ(named(same_work_same_time(hostile.build(), {0}), 0, "forward blocks.0")[0]->t1_ns,
            30 * kMs);
}

// A span's own time off the core is what its children's does not count: a 30 ms backward, 12 ms
// off its core, of which 8 ms were inside its 8 ms wait for a collective (which the replay
// prices). The other 4 ms come out of the backward's own 22 ms, in proportion: 18 ms remain.
TEST(DeviceModel, AChildsTimeOffTheCoreIsItsOwn) {
  HandTrace b(1);
  b.span(0, "backward blocks.0", Category::kBackward, 0, 30 * kMs, 0, 12000);
  b.span(0, "wait all_reduce", Category::kWait, 10 * kMs, 18 * kMs, 0, 8000);
  const Trace t = same_work_same_time(b.build(), {0});
  const auto backward = named(t, 0, "backward blocks.0");
  ASSERT_EQ(backward.size(), 1u);
  // 18 ms of the backward's own and the wait's nanosecond (and a nanosecond of rounding).
  EXPECT_NEAR(backward[0]->t1_ns - backward[0]->t0_ns, 18 * kMs, 2);
  // A wait built from a communication call's stamps measures nothing of its thread: it was
  // blocked all through, and only the rest comes out of the backward.
  HandTrace call(1);
  call.span(0, "backward blocks.0", Category::kBackward, 0, 30 * kMs, 0, 12000);
  call.call(0, "all_reduce", "tp", 0, 2, -1, 64, 10 * kMs, 18 * kMs, 10 * kMs, 18 * kMs);
  const Trace c = same_work_same_time(call.build(), {0});
  const auto blocked = named(c, 0, "backward blocks.0");
  ASSERT_EQ(blocked.size(), 1u);
  EXPECT_NEAR(blocked[0]->t1_ns - blocked[0]->t0_ns, 18 * kMs, 2);
  // Unmeasured (0), a span keeps its wall time.
  HandTrace plain(1);
  plain.span(0, "backward blocks.0", Category::kBackward, 0, 30 * kMs);
  const Trace p = same_work_same_time(plain.build(), {0});
  EXPECT_EQ(named(p, 0, "backward blocks.0")[0]->t1_ns, 30 * kMs);
}

TEST(DeviceModel, MicroBatchesOfOneStageAreTheSameWork) {
  HandTrace b(1);
  b.span(0, "forward micro-batch 0", Category::kForward, 0, 4 * kMs);
  b.span(0, "forward micro-batch 1", Category::kForward, 4 * kMs, 6 * kMs);
  b.span(0, "forward micro-batch 2", Category::kForward, 6 * kMs, 9 * kMs);
  const Trace t = same_work_same_time(b.build(), {0});
  for (int m = 0; m < 3; ++m) {
    const auto e = named(t, 0, "forward micro-batch " + std::to_string(m));
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0]->t1_ns - e[0]->t0_ns, 3 * kMs) << "micro-batch " << m;
  }
}

TEST(DeviceModel, TheHostsWorkBetweenDeviceWorkHidesBehindTheDevice) {
  // Forward 10 ms, 2 ms of host work (posting a send, freeing activations), forward 10 ms.
  HandTrace b(1);
  b.span(0, "step", Category::kStep, 0, 22 * kMs);
  b.span(0, "forward a", Category::kForward, 0, 10 * kMs);
  b.span(0, "forward b", Category::kForward, 12 * kMs, 22 * kMs);
  const Trace measured = b.build();
  EXPECT_TRUE(device_work_on_host_lanes(measured));
  const auto hw = load_hardware_profile("8xH100");
  ReplayOptions options;
  options.device_ahead_of_host = true;
  const Trace ahead = replay_trace(measured, hw, options);
  EXPECT_EQ(named(ahead, 0, "forward b")[0]->t0_ns, 10 * kMs);
  EXPECT_EQ(named(ahead, 0, "step")[0]->t1_ns, 20 * kMs);
  // A host that runs its device in turn (the recording as it was) pays for it.
  options.device_ahead_of_host = false;
  const Trace in_turn = replay_trace(measured, hw, options);
  EXPECT_EQ(named(in_turn, 0, "forward b")[0]->t0_ns, 12 * kMs);
}

TEST(DeviceModel, AWaitHoldsTheDeviceNotTheHost) {
  // Each rank: forward 10 ms, an all_reduce waited for, 0.1 ms of host work, forward 10 ms. The
  // host work runs while the all_reduce is in flight; the second forward starts as it completes.
  HandTrace b(2);
  for (int r = 0; r < 2; ++r) {
    b.span(r, "forward a", Category::kForward, 0, 10 * kMs);
    b.call(r, "all_reduce", "world", 0, 2, -1, 64 << 20, 10 * kMs, 15 * kMs, 10 * kMs, 15 * kMs);
    b.span(r, "forward b", Category::kForward, 15 * kMs + kMs / 10, 25 * kMs);
  }
  const auto hw = load_hardware_profile("8xH100");
  ReplayOptions options;
  options.device_ahead_of_host = true;
  const Trace p = replay_trace(b.build(), hw, options);
  const double collective = estimate_collective("all_reduce", 64 << 20, 2, hw).time_s;
  ASSERT_GT(collective * 1e9, kMs / 10);  // longer than the host's work, which it hides
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(named(p, r, "forward b")[0]->t0_ns, 10 * kMs + collective * 1e9, 2);
  }
}

TEST(DeviceModel, GpuRecordingsKeepTheirKernels) {
  HandTrace b(1);
  b.span(0, "forward a", Category::kForward, 0, 10 * kMs);
  b.span(0, "gemm", Category::kKernel, 1 * kMs, 2 * kMs);
  EXPECT_FALSE(device_work_on_host_lanes(b.build()));
}

}  // namespace
}  // namespace shardscope::profiling
