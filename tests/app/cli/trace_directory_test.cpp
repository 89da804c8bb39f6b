// `run --trace DIR/`: one Kineto file per rank and the native trace, which `report DIR` reads.
// (That HTA reads the files and agrees with report is tests/python/hta_check.py.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/exit_code.h"
#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

using test::cli;
using CliResult = test::CliResult;

namespace fs = std::filesystem;

TEST(CliTraceDirectory, WritesARankFilePerRankAndTheNativeTraceForReport) {
  const fs::path dir = test::test_temp_dir() / "run";
  fs::create_directories(dir);
  // Left by an earlier run of ours with more ranks: HTA would read it as this run's rank 5.
  std::ofstream(dir / "rank-5.json") << R"({"schemaVersion": 1, "traceName": "shardscope rank 5"})";
  // A file of the same form that is not ours stays: only what we wrote is ours to remove.
  std::ofstream(dir / "rank-6.json") << "{}";
  std::ofstream(dir / "notes.txt") << "kept";
  auto r = cli({"run", "--strategy", "ddp_bucketed", "--world", "2", "--preset", "tiny", "--steps",
                "2", "--no-reference", "--trace", dir.string()});
  ASSERT_EQ(r.code, cli::kExitOk) << r.err;
  EXPECT_NE(r.out.find("2 Kineto rank files"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "rank-0.json"));
  EXPECT_TRUE(fs::exists(dir / "rank-1.json"));
  EXPECT_FALSE(fs::exists(dir / "rank-5.json"));
  EXPECT_TRUE(fs::exists(dir / "rank-6.json"));
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
  auto report = cli({"report", dir.string()});
  ASSERT_EQ(report.code, 0) << report.err;
  EXPECT_NE(report.out.find("2 ranks"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("as Holistic Trace Analysis computes them"), std::string::npos)
      << report.out;
}

TEST(CliTraceDirectory, AFileWhereTheDirectoryShouldBeIsBadInputBeforeTheRun) {
  const fs::path file = test::test_temp_dir() / "taken";
  std::ofstream(file) << "x";
  auto r = cli({"run", "--strategy", "ddp_bucketed", "--world", "2", "--preset", "tiny", "--steps",
                "2", "--no-reference", "--trace", file.string() + "/"});
  EXPECT_EQ(r.code, cli::kExitBadInput);
  EXPECT_NE(r.err.find("--trace"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is a file, not a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("step "), std::string::npos) << "the run started:\n" << r.out;
}

// A job's PyTorch profiler files given one by one (issue 36): one job, a rank a file; anything
// else among them is refused, naming it.
TEST(CliTraceDirectory, SeveralProfilerFilesAreOneJob) {
  const fs::path folder = fs::path(SHARDSCOPE_SOURCE_DIR) / "assets/traces/kineto/ddp-w2";
  std::vector<std::string> args = {"report"};
  for (const auto& entry : fs::directory_iterator(folder)) args.push_back(entry.path().string());
  ASSERT_EQ(args.size(), 3u);
  auto r = cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(": 2 ranks"), std::string::npos) << r.out;
  const fs::path notes = test::test_temp_dir() / "notes.txt";
  std::ofstream(notes) << "x";
  args.push_back(notes.string());
  r = cli(args);
  EXPECT_EQ(r.code, cli::kExitBadInput);
  EXPECT_NE(r.err.find("notes.txt is no PyTorch profiler trace"), std::string::npos) << r.err;
}

// `project` replays one job's profiler files as one run, as `report` reads them.
TEST(CliTraceDirectory, ProjectReplaysSeveralProfilerFilesAsOneJob) {
  const fs::path folder = fs::path(SHARDSCOPE_SOURCE_DIR) / "assets/traces/kineto/ddp-w2";
  std::vector<std::string> args = {"project", "--hardware", "8xH100"};
  for (const auto& entry : fs::directory_iterator(folder)) args.push_back(entry.path().string());
  auto r = cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(2 ranks) onto 8xH100"), std::string::npos) << r.out;
  const auto from_folder = cli({"project", "--hardware", "8xH100", folder.string(), "--json"});
  args.push_back("--json");
  r = cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(from_folder.code, 0) << from_folder.err;
  // The same job, read from its files or its folder, projects the same step.
  const auto projected = [](const std::string& out) {
    const size_t from = out.find("\"projected\""), to = out.find("\"trace\"");
    return out.substr(from, to - from);  // the paths, named as given, differ
  };
  EXPECT_EQ(projected(r.out), projected(from_folder.out));
  args.push_back((test::test_temp_dir() / "missing.json").string());
  r = cli(args);
  EXPECT_EQ(r.code, cli::kExitBadInput);
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace shardscope
