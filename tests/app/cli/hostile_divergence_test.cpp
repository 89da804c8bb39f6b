// The hostile suite's diverging runs (issue 33): `--lr 1e30` once trained on to "loss nan", said
// "ranks agree: yes" and exited 0; in processes mode it crashed the launcher on a JSON null. A
// non-finite loss now stops every rank at that step, names the step and the rank, writes no
// checkpoint of it, and the run fails.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "app/cli/exit_code.h"
#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

class HostileDivergence : public testing::TestWithParam<std::string> {};

TEST_P(HostileDivergence, ANonFiniteLossStopsTheRunNamingStepAndRank) {
  // Rank processes are the shardscope binary's, not this test binary's.
  setenv("SHARDSCOPE_WORKER", SHARDSCOPE_BINARY, 1);
  const fs::path ck = test::test_temp_dir() / "ck";
  const test::CliResult r = test::cli({"run",
                                       "--strategy",
                                       "ddp_bucketed",
                                       "--world",
                                       "2",
                                       "--steps",
                                       "4",
                                       "--preset",
                                       "tiny",
                                       "--lr",
                                       "1e30",
                                       "--no-reference",
                                       "--mode",
                                       GetParam(),
                                       "--checkpoint-every",
                                       "1",
                                       "--checkpoint-keep",
                                       "0",
                                       "--checkpoint-dir",
                                       ck.string()});
  EXPECT_EQ(r.code, cli::kExitRunFailed) << r.out << r.err;
  const std::string all = r.out + r.err;
  // The loss (NaN at a step) or the weights (NaN after a step's update) diverged: either stops it.
  EXPECT_NE(all.find("diverged"), std::string::npos) << all;
  std::smatch where;
  ASSERT_TRUE(
      std::regex_search(all, where, std::regex("on rank ([01]) (?:at|after) step ([0-9]+)")))
      << all;
  const int step = std::stoi(where[2]);
  EXPECT_EQ(all.find("ranks agree: yes"), std::string::npos) << all;
  // Every step before it is checkpointed (checkpoint S holds S steps done); the diverged step and
  // everything after are not.
  for (int done = 1; done <= step; ++done) {
    char name[32];
    std::snprintf(name, sizeof name, "step-%06d", done);
    EXPECT_TRUE(fs::exists(ck / name / "manifest.json")) << name;
  }
  char diverged[32];
  std::snprintf(diverged, sizeof diverged, "step-%06d", step + 1);
  EXPECT_FALSE(fs::exists(ck / diverged)) << all;
}

INSTANTIATE_TEST_SUITE_P(Modes, HostileDivergence, testing::Values("threads", "processes"));

}  // namespace
}  // namespace shardscope
