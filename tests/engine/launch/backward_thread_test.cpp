// Issue 37: a GPU runs a rank's backward on autograd's device thread, not on the rank's own. The
// CPU emulation of that (SHARDSCOPE_BACKWARD_THREAD=1, engine/launch/backward_thread.h) shows the
// hang four rank processes sharing one H100 met: a strategy that waits for its peers inside
// backward (fsdp's pre-backward all-gather, zero2's reduce-scatter, torch_ddp's Reducer, tp's
// all-reduce) waited there without giving up the shared device's turn, which the rank's own
// thread held while it waited for backward. Under the emulation every strategy must train in
// processes mode and match one device, with every backward on the second thread and, where a
// strategy communicates inside backward, its hooks there too.
#include "engine/launch/backward_thread.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

class BackwardThread : public testing::Test {
 protected:
  void SetUp() override { setenv("SHARDSCOPE_WORKER", SHARDSCOPE_BINARY, 1); }
  void TearDown() override { unsetenv("SHARDSCOPE_BACKWARD_THREAD"); }
};

Config in_processes(const std::string& strategy, int world) {
  Config c = test::tiny_config(strategy, world, 1);
  c.mode = "processes";
  finalize(c);
  c.steps = 3;
  c.collective_timeout_s = 10;  // a hang fails within it, naming the rank that holds the device
  return c;
}

void expect_trained_on_second_threads(const Config& c, bool hooks_in_backward) {
  SCOPED_TRACE(c.strategy + " " + c.strategy_options.schedule);
  // On only now: a config made under it in threads mode (tiny_config's) would be refused.
  setenv("SHARDSCOPE_BACKWARD_THREAD", "1", 1);
  const RunSummary s = run_training(c);
  unsetenv("SHARDSCOPE_BACKWARD_THREAD");
  test::expect_matches_reference(s);
  EXPECT_TRUE(s.backward_thread) << "not every backward ran on a second thread";
  for (const RankSummary& r : s.ranks) {
    EXPECT_GT(r.backward_thread.passes_on_second_thread, 0) << "rank " << r.rank;
    EXPECT_EQ(r.backward_thread.passes_on_own_thread, 0) << "rank " << r.rank;
    if (hooks_in_backward) {
      EXPECT_GT(r.backward_thread.hooks_off_own_thread, 0) << "rank " << r.rank;
    }
  }
}

TEST_F(BackwardThread, StrategiesThatWaitInsideBackwardTrainInProcessesMode) {
  for (const char* strategy : {"fsdp", "torch_ddp", "zero2", "tp"})
    expect_trained_on_second_threads(in_processes(strategy, 2), true);
}

TEST_F(BackwardThread, EveryOtherStrategyMatchesOneDevice) {
  for (const char* strategy : {"torch_ddp+zero1", "ddp_flat", "ddp_flat+zero1", "ddp_bucketed",
                               "ddp_bucketed+zero1", "zero1", "cp"})
    expect_trained_on_second_threads(in_processes(strategy, 2), true);
  Config ep = in_processes("ddp_bucketed", 2);  // ep needs experts before it is checked
  ep.strategy = "ep";
  ep.model.experts = 4;
  finalize(ep);
  expect_trained_on_second_threads(ep, true);
  Config hybrid = in_processes("hybrid", 4);
  hybrid.strategy_options.tensor_parallel = 2;
  hybrid.strategy_options.pipeline_parallel = 2;
  finalize(hybrid);
  expect_trained_on_second_threads(hybrid, true);
}

TEST_F(BackwardThread, PipelinesUnderEverySchedule) {
  for (const char* schedule :
       {"1f1b", "gpipe", "interleaved-1f1b", "zero-bubble", "zbv", "dualpipev"}) {
    Config c = in_processes("pp", 2);
    c.model.layers = 4;
    c.strategy_options.schedule = schedule;
    c.strategy_options.micro_batches = 4;
    c.micro_batch = 4;
    finalize(c);
    expect_trained_on_second_threads(c, false);
  }
}

}  // namespace
}  // namespace shardscope
