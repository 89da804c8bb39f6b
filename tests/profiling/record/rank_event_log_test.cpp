// A rank's log keeps communication calls with their names interned (recording copies no string)
// in storage that never moves, so a backend thread may stamp one while the rank appends more.
// What is read back must be what was recorded.
#include "profiling/record/rank_event_log.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace shardscope::profiling {
namespace {

CommCall call_named(std::string_view op, std::string_view group, std::string_view dtype,
                    uint64_t seq) {
  CommCall c;
  c.op = op;
  c.group = group;
  c.dtype = dtype;
  c.bytes = static_cast<int64_t>(seq) * 8;
  c.group_size = 4;
  c.peer = static_cast<int>(seq % 3) - 1;
  c.seq = seq;
  c.async = seq % 2 == 0;
  c.emulated = seq % 5 == 0;
  c.t_issue_ns = 1000 + static_cast<int64_t>(seq);
  return c;
}

TEST(RankEventLog, NamesAreCopiedWhenLoggedAndReadBackAsLogged) {
  RankEventLog log(1);
  std::string buffer;
  for (uint64_t i = 0; i < 40; ++i) {
    log.set_position(static_cast<int>(i / 10), static_cast<int>(i % 10));
    // The op's name comes from a buffer the caller then overwrites (and may reallocate).
    buffer = "op" + std::to_string(i % 7);
    log.append(call_named(buffer, i % 2 ? "tp0" : "world", i % 3 ? "Float" : "BFloat16", i));
    buffer.assign(64, 'x');
  }
  const auto events = log.snapshot();
  ASSERT_EQ(events.size(), 40u);
  for (uint64_t i = 0; i < 40; ++i) {
    const CommEvent& e = events[i];
    EXPECT_EQ(e.op, "op" + std::to_string(i % 7)) << i;
    EXPECT_EQ(e.group, i % 2 ? "tp0" : "world") << i;
    EXPECT_EQ(e.dtype, i % 3 ? "Float" : "BFloat16") << i;
    EXPECT_EQ(e.seq, i);
    EXPECT_EQ(e.bytes, static_cast<int64_t>(i) * 8);
    EXPECT_EQ(e.peer, static_cast<int>(i % 3) - 1);
    EXPECT_EQ(e.async, i % 2 == 0);
    EXPECT_EQ(e.emulated, i % 5 == 0);
    EXPECT_EQ(e.step, static_cast<int>(i / 10));
    EXPECT_EQ(e.micro, static_cast<int>(i % 10));
    EXPECT_EQ(e.t_issue_ns, 1000 + static_cast<int64_t>(i));
  }
}

TEST(RankEventLog, RestoringASnapshotGivesItBackWhole) {
  RankEventLog log(0);
  for (uint64_t i = 0; i < 5; ++i) {
    const size_t index = log.append(call_named("all_reduce", "world", "Float", i));
    log.stamp_wait_begin(index, 2000 + static_cast<int64_t>(i));
    log.stamp_complete(index, 3000 + static_cast<int64_t>(i));
    log.stamp_wait_end(index, 4000 + static_cast<int64_t>(i));
  }
  const auto before = log.snapshot();
  RankEventLog copy(0);
  copy.restore(before, {}, {});
  const auto after = copy.snapshot();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i].op, before[i].op);
    EXPECT_EQ(after[i].step, before[i].step);
    EXPECT_EQ(after[i].t_wait_begin_ns, 2000 + static_cast<int64_t>(i));
    EXPECT_EQ(after[i].t_complete_ns, 3000 + static_cast<int64_t>(i));
    EXPECT_EQ(after[i].t_wait_end_ns, 4000 + static_cast<int64_t>(i));
  }
}

// A backend's completion callbacks stamp calls while the rank keeps appending: every stamp lands
// on its own call, however far the storage has grown meanwhile.
TEST(RankEventLog, StampsFromAnotherThreadLandWhileTheRankAppends) {
  RankEventLog log(0);
  constexpr size_t kCalls = 20000;
  std::atomic<size_t> appended{0};
  std::thread backend([&] {
    for (size_t i = 0; i < kCalls; ++i) {
      while (appended.load(std::memory_order_acquire) <= i) std::this_thread::yield();
      log.stamp_complete(i, 10 + static_cast<int64_t>(i));
    }
  });
  for (size_t i = 0; i < kCalls; ++i) {
    log.append(call_named("send", "world", "Float", i));
    appended.store(i + 1, std::memory_order_release);
  }
  backend.join();
  const auto events = log.snapshot();
  ASSERT_EQ(events.size(), kCalls);
  for (size_t i = 0; i < kCalls; ++i) {
    ASSERT_EQ(events[i].t_complete_ns, 10 + static_cast<int64_t>(i)) << i;
    ASSERT_EQ(events[i].seq, i);
  }
}

// A thread that measures its CPU time records how long it was off its core within a span: a
// sleep inside one is off it, a spin is not. Where it does not measure, or the span ends on
// another thread (whose CPU time is not the first's), nothing is recorded.
TEST(RankEventLog, ASpanSaysHowLongItsThreadWasOffItsCore) {
  RankEventLog log(0);
  auto spin = [](std::chrono::milliseconds d) {
    const auto until = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  std::thread([&] {
    RankEventLog::measure_cpu_time_on_this_thread(true);
    const size_t slept = log.begin_span("slept", Category::kOther);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    log.end_span(slept);
    const size_t spun = log.begin_span("spun", Category::kOther);
    spin(std::chrono::milliseconds(20));
    log.end_span(spun);
    const size_t elsewhere = log.begin_span("ended elsewhere", Category::kOther);
    std::thread([&] { log.end_span(elsewhere); }).join();
    RankEventLog::measure_cpu_time_on_this_thread(false);
    const size_t unmeasured = log.begin_span("unmeasured", Category::kOther);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    log.end_span(unmeasured);
  }).join();
  const auto spans = log.spans();
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_GE(spans[0].off_cpu_us, 45000) << "a 50 ms sleep";
  EXPECT_LE(spans[0].off_cpu_us, (spans[0].t1_ns - spans[0].t0_ns) / 1000);
  // A spin is off its core only as long as the machine preempts it: at most the spin.
  EXPECT_LT(spans[1].off_cpu_us, (spans[1].t1_ns - spans[1].t0_ns) / 1000);
  EXPECT_EQ(spans[2].off_cpu_us, 0);
  EXPECT_EQ(spans[3].off_cpu_us, 0);
}

}  // namespace
}  // namespace shardscope::profiling
