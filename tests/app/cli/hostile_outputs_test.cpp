// The hostile suite's output-path cases (issue 33): an output never replaces what it did not make
// (a FIFO, a symlink), never another output or one of the run's inputs, and a name that cannot be
// written (with its temporary suffix) is found before training, not after.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

test::CliResult run_with(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "run",     "--strategy", "ddp_bucketed", "--world", "2",
      "--steps", "1",          "--preset",     "tiny",    "--no-reference"};
  args.insert(args.end(), extra.begin(), extra.end());
  return test::cli(args);
}

void expect_refused(const test::CliResult& r, const std::string& flag, const std::string& phrase) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(phrase), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("step"), std::string::npos) << "trained before refusing:\n" << r.out;
}

TEST(HostileOutputs, TwoOutputsOnOneFileAreRefused) {
  const fs::path dir = test::test_temp_dir();
  const std::string x = (dir / "x.json").string(), y = (dir / "y.pt").string();
  expect_refused(run_with({"--trace", x, "--json", x}), "--", "give each output its own file");
  expect_refused(run_with({"--trace", y, "--export-weights", y}), "--",
                 "give each output its own file");
  // Spelled differently, the same file.
  expect_refused(run_with({"--json", x, "--trace", (dir / "." / "x.json").string()}), "--trace",
                 "also --json");
  EXPECT_FALSE(fs::exists(x));
  EXPECT_FALSE(fs::exists(y));
}

TEST(HostileOutputs, AnOutputOverAnInputIsRefusedAndTheInputStays) {
  const fs::path dir = test::test_temp_dir();
  const fs::path corpus = dir / "corpus.txt", config = dir / "c.json";
  std::ofstream(corpus) << std::string(4096, 'a');
  std::ofstream(config) << R"({"seed": 7})";
  expect_refused(run_with({"--data", corpus.string(), "--json", corpus.string()}), "--json",
                 "--data input");
  expect_refused(run_with({"--config", config.string(), "--export-weights", config.string()}),
                 "--export-weights", "--config input");
  EXPECT_EQ(read(corpus), std::string(4096, 'a'));
  EXPECT_EQ(read(config), R"({"seed": 7})");
}

TEST(HostileOutputs, AFifoOrASymlinkAtAnOutputPathIsRefusedAndStays) {
  const fs::path dir = test::test_temp_dir();
  const fs::path fifo = dir / "fifo", target = dir / "target.txt", link = dir / "link.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  std::ofstream(target) << "keep";
  fs::create_symlink(target, link);
  expect_refused(run_with({"--trace", fifo.string()}), "--trace", "not a regular file");
  expect_refused(run_with({"--json", link.string()}), "--json", "symlink");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read(target), "keep");
  // As root, `--trace /dev/null` once replaced /dev/null with a regular file.
  expect_refused(run_with({"--trace", "/dev/null"}), "--trace", "not a regular file");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

// A 250-character name fits the file system, but not with ".partial" after it: once found only
// after the whole run had trained.
TEST(HostileOutputs, ANameTooLongWithItsTemporarySuffixIsRefusedBeforeTraining) {
  const fs::path dir = test::test_temp_dir();
  const std::string name = std::string(245, 't') + ".json";
  expect_refused(run_with({"--trace", (dir / name).string()}), "--trace", "too long");
  EXPECT_TRUE(fs::is_empty(dir));
}

// `bench --out` on a file or a read-only folder once aborted on an uncaught filesystem_error
// (exit 134) after training the reference.
TEST(HostileOutputs, BenchOutThatCannotHoldTracesIsBadInput) {
  const fs::path dir = test::test_temp_dir();
  std::ofstream(dir / "a-file") << "x";
  fs::create_directories(dir / "read-only");
  fs::permissions(dir / "read-only", fs::perms::owner_read | fs::perms::owner_exec);
  for (const fs::path& out : {dir / "a-file", dir / "a-file" / "sub", dir / "read-only"}) {
    if (out == dir / "read-only" && geteuid() == 0) continue;  // root writes anywhere
    const test::CliResult r = test::cli({"bench", "--quick", "--world", "2", "--strategies",
                                         "ddp_bucketed", "--out", out.string()});
    EXPECT_EQ(r.code, 2) << out << ": " << r.err;
    EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("training the single-device reference"), std::string::npos) << r.err;
  }
  fs::permissions(dir / "read-only", fs::perms::owner_all);
}

}  // namespace
}  // namespace shardscope
