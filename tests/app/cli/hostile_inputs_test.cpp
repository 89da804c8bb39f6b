// The hostile suite's endless and blocking inputs (issue 33): a FIFO as --config, --init-weights
// or a trace once blocked forever (SIGTERM ignored), /dev/zero as --data ran until killed and as a
// trace aborted on bad_alloc. What is not a regular file is refused by what it is, before anything
// opens it, with exit 2 naming the flag or file.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

struct BadInput {
  std::string name;
  std::vector<std::string> args;  // "@fifo" and "@loop" become the paths of a FIFO and a loop
  std::string phrase;
};

std::vector<std::string> run_args(std::vector<std::string> extra) {
  std::vector<std::string> args = {
      "run",     "--strategy", "ddp_bucketed", "--world", "2",
      "--steps", "1",          "--preset",     "tiny",    "--no-reference"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<BadInput> bad_inputs() {
  return {
      {"config_fifo", run_args({"--config", "@fifo"}), "is a FIFO, not a config file"},
      {"init_weights_fifo", run_args({"--init-weights", "@fifo"}), "is a FIFO"},
      {"data_fifo", run_args({"--data", "@fifo"}), "is a FIFO"},
      {"data_dev_zero", run_args({"--data", "/dev/zero"}), "is a character device"},
      {"data_directory", run_args({"--data", "/tmp"}), "is a directory"},
      {"config_loop", run_args({"--config", "@loop"}), "symlink loop"},
      {"report_fifo", {"report", "@fifo"}, "is a FIFO, not a trace file"},
      {"report_dev_zero", {"report", "/dev/zero"}, "is a character device"},
      {"report_dev_urandom", {"report", "/dev/urandom"}, "is a character device"},
      {"project_fifo", {"project", "@fifo", "--hardware", "8xH100"}, "is a FIFO"},
      {"hardware_fifo", {"project", "@trace", "--hardware", "@fifo.json"}, "is a FIFO"},
  };
}

class HostileInput : public testing::TestWithParam<BadInput> {};

TEST_P(HostileInput, IsRefusedWithoutBlockingOrReadingForever) {
  const fs::path dir = test::test_temp_dir();
  const fs::path fifo = dir / "fifo", fifo_json = dir / "fifo.json", loop = dir / "loop";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  ASSERT_EQ(mkfifo(fifo_json.c_str(), 0644), 0);
  fs::create_symlink(loop, loop);
  std::vector<std::string> args = GetParam().args;
  for (std::string& a : args) {
    if (a == "@fifo") a = fifo.string();
    if (a == "@fifo.json") a = fifo_json.string();
    if (a == "@loop") a = loop.string();
    if (a == "@trace")
      a = std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/ddp_bucketed-w2.sst";
  }
  const test::CliResult r = test::cli(args);
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(GetParam().phrase), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Table, HostileInput, testing::ValuesIn(bad_inputs()),
                         [](const testing::TestParamInfo<BadInput>& info) {
                           return info.param.name;
                         });

// `"world": 2, "world": 64` once ran 64 ranks: the parser kept the last silently (issue 33).
TEST(HostileConfigFile, AKeyGivenTwiceInOneObjectIsRefused) {
  const fs::path dir = test::test_temp_dir();
  std::ofstream(dir / "twice.json") << R"({"world": 2, "model": {"layers": 2}, "world": 64})";
  std::ofstream(dir / "nested.json") << R"({"model": {"layers": 2, "layers": 3}})";
  std::ofstream(dir / "apart.json") << R"({"preset": "tiny", "model": {"layers": 2},
                                          "optimizer": {"schedule": "constant"}, "steps": 1,
                                          "strategy": "ddp_bucketed", "world": 2})";
  for (const char* name : {"twice.json", "nested.json"}) {
    const test::CliResult r = test::cli({"run", "--config", (dir / name).string()});
    EXPECT_EQ(r.code, 2) << name << ": " << r.err;
    EXPECT_NE(r.err.find("twice in one object"), std::string::npos) << r.err;
  }
  // A config that gives each key once still runs.
  const test::CliResult fine =
      test::cli({"run", "--config", (dir / "apart.json").string(), "--no-reference"});
  EXPECT_EQ(fine.code, 0) << fine.err;
}

// A NUL inside a value once cut the message there ("unknown strategy 'dd"), since what() is a C
// string: the whole message comes out, the NUL shown as \x00.
TEST(HostileConfigFile, ANulInAValueIsShownAndTheMessageGoesOn) {
  const fs::path dir = test::test_temp_dir();
  std::ofstream(dir / "nul.json") << R"({"strategy": "dd\u0000p", "world": 2})";
  const test::CliResult r = test::cli({"run", "--config", (dir / "nul.json").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("unknown strategy 'dd\\x00p' (known:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\0'), std::string::npos) << r.err;
}

}  // namespace
}  // namespace shardscope
