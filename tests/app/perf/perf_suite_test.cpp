#include "app/perf/perf_suite.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "app/cli/cli_main.h"
#include "app/perf/busbw_ranks.h"
#include "tests/support/temp_dir.h"

namespace shardscope::perf {
namespace {

TEST(PerfSuite, AnUnknownSectionIsRejectedNamingTheKnownOnes) {
  PerfOptions options;
  options.sections = {"startup", "warp-drive"};
  try {
    run_suite(options);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("warp-drive"));
    EXPECT_THAT(e.what(), testing::HasSubstr("collectives"));
  }
  std::ostringstream out, err;
  EXPECT_EQ(cli::cli_main({"perf", "--only", "warp-drive"}, out, err), 2);
  EXPECT_THAT(err.str(), testing::HasSubstr("--only"));
  EXPECT_EQ(cli::cli_main({"perf", "--format", "xml"}, out, err), 2);
}

TEST(PerfSuite, StartupMeasuresThreadsAndProcessesAgainstTheirTargets) {
  setenv("SHARDSCOPE_WORKER", SHARDSCOPE_BINARY, 1);
  PerfOptions options;
  options.quick = true;
  options.sections = {"startup"};
  std::vector<std::string> progress;
  options.progress = [&](const std::string& line) { progress.push_back(line); };
  const auto rows = run_suite(options);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].section, "startup");
  EXPECT_THAT(rows[0].what, testing::HasSubstr("threads"));
  EXPECT_THAT(rows[1].what, testing::HasSubstr("processes"));
  for (const auto& r : rows) {
    EXPECT_GT(r.ours, 0);
    EXPECT_EQ(r.unit, "s");
    EXPECT_FALSE(r.target.empty());
  }
  EXPECT_FALSE(progress.empty());
}

TEST(PerfSuite, EngineOverheadComparesTheTrainerWithAPlainLoop) {
  PerfOptions options;
  options.quick = true;
  options.sections = {"engine"};
  const auto rows = run_suite(options);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_GT(rows[0].ours, 0);
  EXPECT_GT(rows[0].baseline, 0);
  EXPECT_EQ(rows[0].unit, "ms/step");
  // Issue 38's target for a rank alone on its device.
  EXPECT_EQ(rows[0].target, "<= 1.03");
  EXPECT_EQ(rows[0].met, rows[0].ratio <= 1.03);
  EXPECT_NE(rows[0].what.find("(tiny)"), std::string::npos) << rows[0].what;
}

TEST(PerfSuite, RowsPrintAsATableMarkdownAndJson) {
  std::vector<PerfRow> rows(2);
  rows[0] = {"ddp", "ddp_bucketed vs torch_ddp", 90, 100, "ms/step", 0.9, "<= 1.0", true, ""};
  rows[1] = {"collectives", "all_reduce 1 MiB", 0.9, 1.0, "GB/s", 0.9, ">= 0.97", false, "n"};
  std::ostringstream table, markdown, json;
  print_rows(rows, "table", table);
  print_rows(rows, "markdown", markdown);
  print_rows(rows, "json", json);
  EXPECT_THAT(table.str(), testing::HasSubstr("MISSED"));
  EXPECT_THAT(markdown.str(), testing::HasSubstr("|---"));
  const auto parsed = nlohmann::json::parse(json.str());
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[1]["met"], false);
  EXPECT_DOUBLE_EQ(parsed[0]["ratio"].get<double>(), 0.9);
}

TEST(PerfSuite, MedianLeavesTheWarmUpStepOut) {
  EXPECT_DOUBLE_EQ(median_step_seconds({10.0, 1.0, 2.0, 3.0}), 2.0);
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
}

// The backends section's rank processes: every op timed over shm and Gloo alike.
TEST(PerfBusbw, RankProcessesTimeEveryOpOverEitherBackend) {
  setenv("SHARDSCOPE_WORKER", SHARDSCOPE_BINARY, 1);
  for (const char* backend : {"shm", "gloo"}) {
    const CollectiveSeconds s = time_collectives_in_processes(backend, 2, {int64_t{1} << 20}, 1);
    ASSERT_EQ(s.size(), 3u) << backend;
    for (const auto& [key, seconds] : s) EXPECT_GT(seconds, 0) << backend << " " << key.first;
  }
}

// Rank processes that force different shm paths would pair one's probe with another's
// collectives: every one of them refuses, naming the variable, and none hangs.
TEST(PerfBusbw, RankProcessesThatForceDifferentShmPathsAreAllRefused) {
  const auto dir = test::test_temp_dir();
  const std::string rank =
      std::string(SHARDSCOPE_BINARY) +
      " perf-busbw-rank --world 2 --backend shm --sizes 1024 --rounds 1 --dir " + dir.string() +
      " --rank ";
  const std::string script = "(SHARDSCOPE_SHM_PATH=slots timeout 120 " + rank + "0 > " +
                             (dir / "rank0.log").string() + " 2>&1; echo $? > " +
                             (dir / "rank0.code").string() + ") & (timeout 120 " + rank + "1 > " +
                             (dir / "rank1.log").string() + " 2>&1; echo $? > " +
                             (dir / "rank1.code").string() + "); wait";
  ASSERT_EQ(std::system(("bash -c '" + script + "'").c_str()), 0);
  for (const char* r : {"rank0", "rank1"}) {
    std::ifstream code_file(dir / (std::string(r) + ".code")),
        log_file(dir / (std::string(r) + ".log"));
    int code = -1;
    code_file >> code;
    const std::string log((std::istreambuf_iterator<char>(log_file)), {});
    EXPECT_NE(code, 0) << r;
    EXPECT_NE(code, 124) << r << " hung";
    EXPECT_THAT(log, testing::HasSubstr("SHARDSCOPE_SHM_PATH differs")) << r;
  }
}

}  // namespace
}  // namespace shardscope::perf
