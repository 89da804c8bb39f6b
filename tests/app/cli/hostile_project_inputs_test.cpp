// The hostile suite's cases for what `project` and `perf` are given (stop 56's sweep): a model
// projected for its memory is checked as a run's is, a batch is never negative, a refused
// collective prints no table first, and a trace `perf` cannot open is bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  // Each names its flag (sweep 3: the model's words came alone).
  expect_refused({"project", "--collective", "bogus"}, "--collective: no cost model");
  expect_refused({"project", "--collective", "all_reduce", "--ranks", "9"}, "--ranks: 9 ranks");
  expect_refused({"project", "--collective", "all_gather", "--algorithm", "tree"},
                 "--algorithm: the tree algorithm");
  expect_refused({"project", "--collective", "all_reduce", "--algorithm", "zigzag"},
                 "--algorithm: unknown algorithm 'zigzag'");
  expect_refused({"project", "--collective", "all_reduce", "--bytes", "-1"},
                 "--bytes: expected a size");
}

TEST(HostileProjectInputs, ATracePerfCannotOpenIsBadInputBeforeTheSuite) {
  const auto dir = test::test_temp_dir();
  const test::CliResult r =
      test::cli({"perf", "--quick", "--only", "gui", "--trace", (dir / "missing.sst").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--trace"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[gui]"), std::string::npos) << "the suite started first:\n" << r.err;
}

// Hostile sweep 3 (2026-11-28): counts a projection walks are bounded (--grad-accum 2e9 ran out
// of memory; --micro-batches 2e9 overflowed a product in its message).
TEST(HostileProjectInputs, AccumulationAndMicroBatchesAreBounded) {
  const std::vector<std::string> gpt = {"project", "--preset", "gpt-7b", "--world", "8"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = gpt;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_refused(with({"--strategy", "ddp_bucketed", "--grad-accum", "2000000000"}),
                 "--grad-accum");
  expect_refused(with({"--strategy", "pp", "--micro-batches", "2000000000"}), "--micro-batches");
  EXPECT_EQ(test::cli(with({"--strategy", "ddp_bucketed", "--grad-accum", "64"})).code, 0);
}

// A trace of ours whose recorded config could not have run (edited: heads 0 divided by zero in
// `project`, experts 1e9 ran out of memory), or that holds no step (a projection of nothing
// printed 0.00 ms, exit 0), is bad input naming the trace and the key.
TEST(HostileProjectInputs, ATracesRecordedConfigAndStepsAreChecked) {
  const auto dir = test::test_temp_dir();
  const std::string chrome = (dir / "t.json").string();
  const test::CliResult ran =
      test::cli({"run", "--preset", "tiny", "--strategy", "ddp_bucketed", "--world", "2", "--steps",
                 "2", "--no-reference", "--quiet", "--trace", chrome});
  ASSERT_EQ(ran.code, 0) << ran.err;
  std::ifstream in(chrome);
  const nlohmann::json trace = nlohmann::json::parse(in);
  const auto edited = [&](const std::string& name, auto&& edit) {
    nlohmann::json t = trace;
    edit(t);
    const std::string path = (dir / name).string();
    std::ofstream(path) << t.dump();
    return path;
  };
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"heads", 0}, {"experts", 1000000000}, {"vocab", 0}, {"d_model", -64}}) {
    const std::string path = edited(key + ".json", [&](nlohmann::json& t) {
      t["otherData"]["run"]["config"]["model"][key] = value;
    });
    for (const char* command : {"project", "report"}) {
      const test::CliResult r = test::cli({command, path});
      EXPECT_EQ(r.code, 2) << command << " " << key << ": " << r.err;
      EXPECT_NE(r.err.find("model." + key), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
    }
  }
  const std::string no_steps = edited("no-steps.json", [](nlohmann::json& t) {
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& e : t["traceEvents"])
      if (e.value("ph", "") == "M") kept.push_back(e);
    t["traceEvents"] = kept;
  });
  const test::CliResult r = test::cli({"project", no_steps});
  EXPECT_EQ(r.code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("no training step"), std::string::npos) << r.err;
}

// A profile given by path is named by its path wherever it is at fault: a copy of 8xH100 edited
// to one GPU was once "8xH100 (1 GPUs)", which blamed the shipped profile.
TEST(HostileProjectInputs, AProfileGivenByPathIsNamedByItsPath) {
  std::ifstream shipped(std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/hardware/8xH100.json");
  nlohmann::json profile = nlohmann::json::parse(shipped);
  profile["gpus_per_node"] = 1;
  profile.erase("inter");
  const std::string path = (test::test_temp_dir() / "one-gpu.json").string();
  std::ofstream(path) << profile.dump();
  const std::string trace =
      std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/ddp_bucketed-w2.sst";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"project", trace, "--hardware", path},
        std::vector<std::string>{"project", "--collective", "all_reduce", "--ranks", "2",
                                 "--hardware", path},
        std::vector<std::string>{"project", "--preset", "tiny", "--strategy", "ddp_bucketed",
                                 "--world", "2", "--nodes", "2", "--hardware", path}}) {
    const test::CliResult r = test::cli(args);
    EXPECT_EQ(r.code, 2) << args[1] << ": " << r.err;
    EXPECT_NE(r.err.find("8xH100 (from " + path + ")"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace shardscope
