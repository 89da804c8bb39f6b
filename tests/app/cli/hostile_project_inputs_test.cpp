// The hostile suite's cases for what `project` and `perf` are given (stop 56's sweep): a model
// projected for its memory is checked as a run's is, a batch is never negative, a refused
// collective prints no table first, and a trace `perf` cannot open is bad input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

void expect_refused(const std::vector<std::string>& args, const std::string& flag) {
  const test::CliResult r = test::cli(args);
  EXPECT_EQ(r.code, 2) << args[1] << " " << r.err;
  EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "printed before refusing:\n" << r.out;
}

TEST(HostileProjectInputs, AModelProjectedForItsMemoryIsCheckedAsARunsIs) {
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--layers", "-1"},
                                                        {"--layers", "0"},
                                                        {"--layers", "99999"},
                                                        {"--d-model", "0"},
                                                        {"--heads", "7"},
                                                        {"--vocab", "-5"},
                                                        {"--seq", "0"},
                                                        {"--mlp-ratio", "0"},
                                                        {"--micro-batch", "-1"}}) {
    expect_refused({"project", "--memory", "--preset", "gpt-7b", flag, value}, flag);
  }
  EXPECT_EQ(test::cli({"project", "--memory", "--preset", "gpt-7b"}).code, 0);
}

TEST(HostileProjectInputs, AConfigurationsBatchAndWorldArePositive) {
  const std::vector<std::string> tiny = {"project", "--preset", "tiny", "--strategy",
                                         "ddp_bucketed"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = tiny;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_refused(with({"--world", "2", "--global-batch", "-1"}), "--global-batch");
  expect_refused(with({"--world", "2", "--search", "--global-batch", "-8"}), "--global-batch");
  expect_refused(with({"--world", "0"}), "--world");
  expect_refused(with({"--world", "-3", "--search"}), "--world");
  // Far past any model, where sizes would overflow: refused naming the width, not "negative size".
  expect_refused(with({"--world", "2", "--d-model", "2147483520", "--heads", "1"}), "--d-model");
}

TEST(HostileProjectInputs, ARefusedCollectivePrintsNoTableFirst) {
  expect_refused({"project", "--collective", "bogus"}, "bogus");
  expect_refused({"project", "--collective", "all_reduce", "--ranks", "9"}, "9 ranks");
  expect_refused({"project", "--collective", "all_reduce", "--algorithm", "bogus"}, "bogus");
}

TEST(HostileProjectInputs, ATracePerfCannotOpenIsBadInputBeforeTheSuite) {
  const auto dir = test::test_temp_dir();
  const test::CliResult r =
      test::cli({"perf", "--quick", "--only", "gui", "--trace", (dir / "missing.sst").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--trace"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[gui]"), std::string::npos) << "the suite started first:\n" << r.err;
}

}  // namespace
}  // namespace shardscope
