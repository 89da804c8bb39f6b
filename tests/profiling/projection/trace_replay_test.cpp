// Replaying a trace onto a hardware profile: compute scaled, collectives at the cost model's
// time once every member issued them, waits where the code waited, sends paired with receives.
#include "profiling/projection/trace_replay.h"

#include <gtest/gtest.h>

#include "profiling/metrics/trace_metrics.h"
#include "profiling/projection/collective_model.h"
#include "tests/support/hand_trace.h"

namespace shardscope::profiling {
namespace {

constexpr int64_t kMs = 1000000;

const Event& find(const Trace& t, int rank, const char* name) {
  for (const auto& e : t.ranks[rank].events) {
    if (t.str(e.name) == name) return e;
  }
  throw std::runtime_error(std::string("no event ") + name);
}

// Two ranks: 10 ms of backward, then a 64 MiB all_reduce that took 50 ms here, then 2 ms of
// optimizer step.
Trace backward_all_reduce_optimizer() {
  HandTrace b(2);
  for (int r = 0; r < 2; ++r) {
    b.span(r, "step 0", Category::kStep, 0, 62 * kMs);
    b.span(r, "backward", Category::kBackward, 0, 10 * kMs);
    b.call(r, "all_reduce", "world", 0, 2, -1, 64 << 20, 10 * kMs, 60 * kMs, 10 * kMs, 60 * kMs);
    b.span(r, "optimizer", Category::kOptimizer, 60 * kMs, 62 * kMs);
  }
  return b.build();
}

TEST(TraceReplay, ScalesComputeAndTimesCollectivesByTheModel) {
  const auto hw = load_hardware_profile("8xH100");
  ReplayOptions options;
  options.compute_scale = 0.1;
  const Trace p = replay_trace(backward_all_reduce_optimizer(), hw, options);
  const double collective = estimate_collective("all_reduce", 64 << 20, 2, hw).time_s;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(find(p, r, "backward").t1_ns, 1 * kMs);
    const Event& ar = find(p, r, "all_reduce");
    EXPECT_EQ(ar.t0_ns, 1 * kMs);
    EXPECT_NEAR(ar.t1_ns, 1 * kMs + collective * 1e9, 2);
    const Event& step = find(p, r, "step 0");
    EXPECT_NEAR(step.t1_ns, 1 * kMs + collective * 1e9 + 0.2 * kMs, 2);
  }
  EXPECT_NE(run_record_to_json(p.run).find("8xH100"), std::string::npos);
}

// A pass the GPU model priced takes its own scale (its priced time over its measured compute);
// the rest of the host's time keeps compute_scale, and a span can start mid-way.
TEST(TraceReplay, ScaledSpansTakeTheirOwnScale) {
  const Trace measured = backward_all_reduce_optimizer();
  const auto hw = load_hardware_profile("8xH100");
  ReplayOptions options;
  options.compute_scale = 0.1;
  // Rank 0: its backward's last 6 ms at 0.5 (the first 4 at 0.1); rank 1: its optimizer at 2.
  options.span_scales = {{{4 * kMs, 10 * kMs, 0.5}}, {{60 * kMs, 62 * kMs, 2.0}}};
  const Trace p = replay_trace(measured, hw, options);
  const double collective = estimate_collective("all_reduce", 64 << 20, 2, hw).time_s * 1e9;
  EXPECT_NEAR(find(p, 0, "backward").t1_ns, 0.4 * kMs + 3 * kMs, 2);
  EXPECT_NEAR(find(p, 1, "backward").t1_ns, 1 * kMs, 2);
  // The all_reduce starts when the later rank issues it.
  const double start = 3.4 * kMs;
  EXPECT_NEAR(find(p, 1, "all_reduce").t0_ns, 1 * kMs, 2);
  EXPECT_NEAR(find(p, 0, "all_reduce").t1_ns, start + collective, 2);
  EXPECT_NEAR(find(p, 0, "step 0").t1_ns, start + collective + 0.2 * kMs, 2);
  EXPECT_NEAR(find(p, 1, "step 0").t1_ns, start + collective + 4 * kMs, 2);
  ReplayOptions overlapping = options;
  overlapping.span_scales = {{{0, 5 * kMs, 1.0}, {4 * kMs, 6 * kMs, 1.0}}};
  EXPECT_THROW(replay_trace(measured, hw, overlapping), std::runtime_error);
  overlapping.span_scales = {{{0, 5 * kMs, 0.0}}};
  EXPECT_THROW(replay_trace(measured, hw, overlapping), std::runtime_error);
}

TEST(TraceReplay, AStragglerMakesTheOthersWait) {
  // Rank 1 computes twice as long; rank 0's wait grows by the difference.
  HandTrace b(2);
  b.span(0, "forward", Category::kForward, 0, 10 * kMs);
  b.span(1, "forward", Category::kForward, 0, 20 * kMs);
  b.call(0, "all_reduce", "world", 0, 2, -1, 1024, 10 * kMs, 21 * kMs, 10 * kMs, 21 * kMs);
  b.call(1, "all_reduce", "world", 0, 2, -1, 1024, 20 * kMs, 21 * kMs, 20 * kMs, 21 * kMs);
  const auto hw = load_hardware_profile("8xA100");
  const Trace p = replay_trace(b.build(), hw, {});
  const double collective = estimate_collective("all_reduce", 1024, 2, hw).time_s;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(find(p, r, "all_reduce").t1_ns, 20 * kMs + static_cast<int64_t>(collective * 1e9));
  }
  const Event& wait0 = find(p, 0, "wait all_reduce");
  EXPECT_EQ(wait0.t0_ns, 10 * kMs);
  EXPECT_NEAR(double(wait0.t1_ns - wait0.t0_ns), 10 * kMs + collective * 1e9, 2);
}

TEST(TraceReplay, OverlappedCommunicationStaysHidden) {
  // A bucket's all_reduce issued at 4 ms runs under 6 more ms of backward, waited for at 10 ms.
  HandTrace b(2);
  for (int r = 0; r < 2; ++r) {
    b.span(r, "backward", Category::kBackward, 0, 10 * kMs);
    b.call(r, "all_reduce", "world", 0, 2, -1, 1 << 20, 4 * kMs, 30 * kMs, 10 * kMs, 30 * kMs);
  }
  const Trace p = replay_trace(b.build(), load_hardware_profile("8xH100"), {});
  // On NVLink 1 MiB takes tens of microseconds: done long before backward ends, no wait.
  const Event& wait = find(p, 0, "wait all_reduce");
  EXPECT_EQ(wait.t0_ns, 10 * kMs);
  EXPECT_EQ(wait.t1_ns, 10 * kMs);
}

TEST(TraceReplay, SendsPairWithReceivesDownAPipeline) {
  // Stage 0 computes 5 ms and sends; stage 1 waits in its receive, then computes 5 ms.
  HandTrace b(2);
  b.span(0, "forward 0", Category::kForward, 0, 5 * kMs);
  b.call(0, "send", "pp", 0, 2, 1, 4 << 20, 5 * kMs, 6 * kMs, 6 * kMs, 6 * kMs);
  b.call(1, "recv", "pp", 0, 2, 0, 4 << 20, 0, 6 * kMs, 0, 6 * kMs);
  b.span(1, "forward 1", Category::kForward, 6 * kMs, 11 * kMs);
  const auto hw = load_hardware_profile("8xH100");
  const Trace p = replay_trace(b.build(), hw, {});
  const double transfer = estimate_collective("send", 4 << 20, 2, hw).time_s;
  const Event& recv = find(p, 1, "recv");
  EXPECT_NEAR(recv.t1_ns, 5 * kMs + transfer * 1e9, 2);
  EXPECT_NEAR(find(p, 1, "forward 1").t0_ns, 5 * kMs + transfer * 1e9, 2);
  EXPECT_NEAR(find(p, 1, "forward 1").t1_ns, 10 * kMs + transfer * 1e9, 2);
}

TEST(TraceReplay, APipelineShowsTheTextbookBubble) {
  // GPipe, 2 stages, 4 micro-batches; forward 1 ms and backward 2 ms on both stages. As
  // recorded, the stages never waited (as if each had run alone); the replay must find the
  // pipeline's dependencies: (p-1)/(m+p-1) = 1/5 of the pipeline idle on each stage.
  HandTrace b(2);
  const int m = 4;
  int64_t t = 0;  // stage 0's measured clock
  for (int i = 0; i < m; ++i) {
    b.span(0, "forward", Category::kForward, t, t + kMs);
    t += kMs;
    b.call(0, "send", "world", i, 2, 1, 1 << 20, t, t, -1, -1);
  }
  for (int i = 0; i < m; ++i) {
    b.call(0, "recv", "world", i, 2, 1, 1 << 20, t, t, t, t);
    b.span(0, "backward", Category::kBackward, t, t + 2 * kMs);
    t += 2 * kMs;
  }
  b.span(0, "micro-batch 0", Category::kMicroBatch, 0, t);
  int64_t u = 0;  // stage 1's
  for (int i = 0; i < m; ++i) {
    b.call(1, "recv", "world", i, 2, 0, 1 << 20, u, u, u, u);
    b.span(1, "forward", Category::kForward, u, u + kMs);
    u += kMs;
  }
  for (int i = 0; i < m; ++i) {
    b.span(1, "backward", Category::kBackward, u, u + 2 * kMs);
    u += 2 * kMs;
    b.call(1, "send", "world", i, 2, 0, 1 << 20, u, u, -1, -1);
  }
  b.span(1, "micro-batch 0", Category::kMicroBatch, 0, u);
  const Trace p = replay_trace(b.build(), load_hardware_profile("8xH100"), {});
  for (const auto& metrics : step_metrics(p)) {
    // 1 MiB point-to-point on NVLink takes some 10 us per hop: a fraction of a point.
    EXPECT_NEAR(metrics.bubble_fraction(), 1.0 / 5, 0.01) << "rank " << metrics.rank;
  }
}

TEST(TraceReplay, WaitingForATurnOnASharedDeviceTakesNoTime) {
  // Recorded with --serialize-compute: rank 0 waited 8 ms for the device before computing.
  HandTrace b(1);
  b.span(0, kDeviceTurnWaitName, Category::kWait, 0, 8 * kMs);
  b.span(0, "forward", Category::kForward, 8 * kMs, 10 * kMs);
  const Trace p = replay_trace(b.build(), load_hardware_profile("8xH100"), {});
  EXPECT_EQ(find(p, 0, "forward").t0_ns, 0);
  EXPECT_EQ(find(p, 0, "forward").t1_ns, 2 * kMs);
  EXPECT_EQ(find(p, 0, kDeviceTurnWaitName).t1_ns, 0);
}

TEST(TraceReplay, InconsistentTracesAndTooFewGpusAreErrors) {
  HandTrace b(2);
  b.call(0, "all_reduce", "world", 0, 2, -1, 8, 0, 1 * kMs, 0, 1 * kMs);  // rank 1 never joins
  EXPECT_THROW(replay_trace(b.build(), load_hardware_profile("8xH100"), {}), std::runtime_error);
  HandTrace many(9);
  EXPECT_THROW(replay_trace(many.build(), load_hardware_profile("8xH100"), {}), std::runtime_error);
  ReplayOptions zero;
  zero.compute_scale = 0;
  EXPECT_THROW(replay_trace(HandTrace(2).build(), load_hardware_profile("8xH100"), zero),
               std::runtime_error);
}

}  // namespace
}  // namespace shardscope::profiling
