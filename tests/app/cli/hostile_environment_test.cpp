// The hostile sweep of stop 58: environment variables that change how ranks start and talk, and
// the default hardware profile bench and report read. A bad one is the user's input, refused
// before any rank starts naming the variable (exit 2): a negative SHARDSCOPE_SHM_SLOT_BYTES once
// segfaulted the first collective (strtoull read "-1" as 2^64 - 1), a 9000-character run id
// printed the store's stack dump, a missing worker binary ended as "status 127", and bench
// aborted (134) after training every strategy when its default profile could not be read.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

// Sets one variable for the scope, and puts back what was there.
class ScopedVariable {
 public:
  ScopedVariable(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* was = std::getenv(name_.c_str())) was_ = was;
    setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedVariable() {
    if (was_)
      setenv(name_.c_str(), was_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> was_;
};

const std::vector<std::string> kTinyRun = {"run",      "--preset",       "tiny",   "--strategy",
                                           "ddp_flat", "--world",        "2",      "--steps",
                                           "1",        "--no-reference", "--quiet"};

TEST(HostileEnvironment, ABadLaunchVariableIsRefusedNamingItBeforeAnyRankStarts) {
  struct Case {
    std::string name, value, says;
  };
  for (const Case& c : std::vector<Case>{
           {"SHARDSCOPE_SHM_SLOT_BYTES", "-1", "expected a byte count from 256 to 1073741824"},
           {"SHARDSCOPE_SHM_SLOT_BYTES", "99999999999999999999", "got '99999999999999999999'"},
           {"SHARDSCOPE_SHM_SLOT_BYTES", "1152921504606846976", "from 256 to 1073741824"},
           {"SHARDSCOPE_SHM_SLOT_BYTES", "1e9", "got '1e9'"},
           {"SHARDSCOPE_SHM_RING_BYTES", "-1", "from 32 to 1073741824"},
           {"SHARDSCOPE_SNAPSHOT_MS", "abc", "expected milliseconds"},
           {"SHARDSCOPE_RUN_ID", std::string(9000, 'x'), "at most 128 printable characters"},
           {"TORCHELASTIC_RUN_ID", "two words", "without spaces"},
           {"SHARDSCOPE_WORKER", "/nonexistent/shardscope", "is not an executable file"}}) {
    const ScopedVariable set(c.name, c.value);
    for (const char* mode : {"threads", "processes"}) {
      std::vector<std::string> args = kTinyRun;
      args.insert(args.end(), {"--mode", mode});
      const test::CliResult r = test::cli(args);
      EXPECT_EQ(r.code, 2) << c.name << "=" << c.value.substr(0, 30) << " " << mode << ": "
                           << r.err;
      EXPECT_NE(r.err.find(c.name + ": "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("frame #"), std::string::npos) << r.err;
    }
  }
  // In bounds, the same variables run (the suite's shm tests shrink the slots this way).
  const ScopedVariable slot("SHARDSCOPE_SHM_SLOT_BYTES", "4096");
  const ScopedVariable id("SHARDSCOPE_RUN_ID", "job-7");
  EXPECT_EQ(test::cli(kTinyRun).code, 0);
}

// Without --hardware, device time reads the default profile of the runs' device; where it cannot
// be read, bench says so before training anything, and report shows the recording's own times.
TEST(HostileEnvironment, AnUnreadableDefaultProfileIsSaidBeforeBenchTrains) {
  const auto assets = test::test_temp_dir() / "assets";
  std::filesystem::create_directories(assets / "hardware");
  std::ofstream(assets / "hardware" / "cpu-10GbE.json") << "{";
  const ScopedVariable moved("SHARDSCOPE_ASSETS", assets.string());
  const test::CliResult bench = test::cli(
      {"bench", "--strategies", "ddp_flat", "--world", "2", "--steps", "1", "--preset", "tiny"});
  EXPECT_EQ(bench.code, 2) << bench.err;
  EXPECT_NE(bench.err.find("cpu-10GbE.json: not valid JSON"), std::string::npos) << bench.err;
  EXPECT_NE(bench.err.find("give --hardware or --measured"), std::string::npos) << bench.err;
  EXPECT_EQ(bench.err.find("training"), std::string::npos) << "trained first:\n" << bench.err;
  const test::CliResult report = test::cli(
      {"report", std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/ddp_bucketed-w2.sst"});
  EXPECT_EQ(report.code, 0) << report.err;
  EXPECT_NE(report.out.find("device time unavailable"), std::string::npos) << report.out;
}

}  // namespace
}  // namespace shardscope
