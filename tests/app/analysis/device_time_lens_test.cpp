// How a recorded run is shown (app/analysis/device_time_lens): what its picture cannot be trusted
// for is said beside it. Ranks that shared a GPU and passed the turn on before it ran their
// kernels (every GPU recording before 2026-11-27, the H100 trace we ship among them) have kernels
// that may have run time-sliced with each other's.
#include "app/analysis/device_time_lens.h"

#include <gtest/gtest.h>

#include <string>

#include "app/analysis/trace_open.h"
#include "profiling/trace/run_record.h"

namespace shardscope::analysis {
namespace {

std::string asset(const std::string& name) {
  return std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/" + name;
}

TEST(DeviceTimeLens, RanksThatSharedAGpuAreSaidToReadLong) {
  profiling::Trace h100 = open_trace_path(asset("h100-ddp_bucketed-w4.sst"));
  ASSERT_EQ(h100.run.device, "cuda:0");
  ASSERT_FALSE(h100.run.turns_drain_device);
  const LensedTrace before = apply_lens(h100, Lens{});
  EXPECT_TRUE(before.device_time);
  EXPECT_NE(before.note.find("shared one GPU"), std::string::npos) << before.note;

  // Recorded with the drain, as runs on a GPU are now: the drain did not take a turn back to a
  // lone rank's step on an H200 (2026-11-27), so that is said too.
  h100.run.turns_drain_device = true;
  const std::string drained = apply_lens(h100, Lens{}).note;
  EXPECT_NE(drained.find("shared one GPU"), std::string::npos) << drained;
  EXPECT_NE(drained.find("drained or not"), std::string::npos) << drained;

  // A CPU recording takes turns on its cores: its compute is its own.
  const profiling::Trace cpu = open_trace_path(asset("ddp_bucketed-w2.sst"));
  EXPECT_EQ(apply_lens(cpu, Lens{}).note, "");
}

TEST(DeviceTimeLens, WhetherTurnsDrainedTheGpuTravelsWithTheTrace) {
  profiling::RunRecord run;
  run.strategy = "ddp_bucketed";
  run.device = "cuda:0";
  EXPECT_FALSE(
      profiling::run_record_from_json(profiling::run_record_to_json(run)).turns_drain_device);
  run.turns_drain_device = true;
  EXPECT_TRUE(
      profiling::run_record_from_json(profiling::run_record_to_json(run)).turns_drain_device);
}

}  // namespace
}  // namespace shardscope::analysis
