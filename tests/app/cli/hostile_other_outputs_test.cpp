// The hostile suite's cases for the outputs of commands other than `run` (stop 56's sweep): project
// --out, view/gui --screenshot and --state never write over what they read, a FIFO, a folder or
// each other, and are checked before any work; a trace directory shares no file with --json and
// removes no rank file it did not write; an empty value is refused; two runs never write one
// output at once.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/state/atomic_file.h"
#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string shipped_trace() {
  return std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/ddp_bucketed-w2.sst";
}

void expect_refused(const test::CliResult& r, const std::string& flag, const std::string& phrase) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(phrase), std::string::npos) << r.err;
  // Refused before any work: no projection, no table printed first.
  EXPECT_EQ(r.out, "") << r.out;
}

TEST(HostileOtherOutputs, ProjectNeverWritesOverItsInputs) {
  const fs::path dir = test::test_temp_dir();
  const fs::path trace = dir / "in.sst", profile = dir / "my.json";
  fs::copy_file(shipped_trace(), trace);
  fs::copy_file(std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/hardware/8xH100.json", profile);
  const std::string trace_bytes = read(trace), profile_bytes = read(profile);
  expect_refused(test::cli({"project", trace.string(), "--out", trace.string()}), "--out",
                 "is the trace input");
  expect_refused(
      test::cli({"project", trace.string(), "--out", (dir / "x" / ".." / "in.sst").string()}),
      "--out", "is the trace input");
  expect_refused(
      test::cli({"project", "--preset", "tiny", "--world", "2", "--strategy", "ddp_bucketed",
                 "--hardware", profile.string(), "--out", profile.string()}),
      "--out", "is the --hardware input");
  EXPECT_EQ(read(trace), trace_bytes);
  EXPECT_EQ(read(profile), profile_bytes);
}

TEST(HostileOtherOutputs, ProjectRefusesAFifoAFolderAndANameEndingInASlashFirst) {
  const fs::path dir = test::test_temp_dir();
  const fs::path fifo = dir / "f", folder = dir / "d";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  fs::create_directory(folder);
  expect_refused(test::cli({"project", shipped_trace(), "--out", fifo.string()}), "--out",
                 "not a regular file");
  expect_refused(test::cli({"project", shipped_trace(), "--out", folder.string()}), "--out",
                 "is a directory");
  expect_refused(test::cli({"project", shipped_trace(), "--out", (dir / "new").string() + "/"}),
                 "--out", "names a folder");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_FALSE(fs::exists(dir / "new"));
}

TEST(HostileOtherOutputs, AScreenshotOrStateNeverWritesOverATraceOrEachOther) {
  const fs::path dir = test::test_temp_dir();
  const fs::path trace = dir / "v.sst", fifo = dir / "f";
  fs::copy_file(shipped_trace(), trace);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string bytes = read(trace);
  // Checked before the app starts: no display is needed to be refused.
  expect_refused(test::cli({"view", trace.string(), "--screenshot", trace.string()}),
                 "--screenshot", "is the trace input");
  const std::string png = (dir / "s.png").string();
  expect_refused(test::cli({"gui", "--open", trace.string(), "--screenshot", png, "--state", png}),
                 "--state", "also --screenshot");
  expect_refused(test::cli({"view", trace.string(), "--screenshot", fifo.string()}), "--screenshot",
                 "not a regular file");
  expect_refused(test::cli({"view", trace.string(), "--screenshot", dir.string()}), "--screenshot",
                 "is a directory");
  EXPECT_EQ(read(trace), bytes);
  EXPECT_FALSE(fs::exists(png));
}

TEST(HostileOtherOutputs, AScriptsOwnOutputsAreCheckedAsTheFlagsAre) {
  const fs::path dir = test::test_temp_dir();
  const fs::path trace = dir / "t.sst", fifo = dir / "f", script = dir / "s.script";
  fs::copy_file(shipped_trace(), trace);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const std::string bytes = read(trace);
  for (const auto& [text, phrase] : std::vector<std::pair<std::string, std::string>>{
           {"open " + trace.string() + "\nscreenshot " + trace.string() + "\n",
            "is the trace input"},
           {"save " + script.string() + "\n", "is the --script input"},
           {"state " + fifo.string() + "\n", "not a regular file"},
           {"screenshot " + (dir / "x.png").string() + "\nstate " + (dir / "x.png").string() + "\n",
            "also --script line 1 (screenshot)"}}) {
    std::ofstream(script) << text;
    // Refused before the app starts: no display is needed.
    expect_refused(test::cli({"gui", "--script", script.string()}), "--script line", phrase);
  }
  EXPECT_EQ(read(trace), bytes);
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST(HostileOtherOutputs, CalibrateAndBenchCheckTheirOutputsBeforeMeasuring) {
  const fs::path dir = test::test_temp_dir();
  const fs::path fifo = dir / "f";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  for (const std::string& out : {fifo.string(), dir.string()}) {
    const test::CliResult r = test::cli({"calibrate", "--quick", "--out", out});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("calibrating"), std::string::npos) << "measured first:\n" << r.out;
  }
  // A folder where bench would write a strategy's trace: refused before any strategy trains (it
  // once aborted after the whole bench).
  fs::create_directories(dir / "b" / "torch_ddp.sst");
  const test::CliResult r = test::cli({"bench", "--quick", "--world", "2", "--steps", "2",
                                       "--strategies", "torch_ddp", "--out", (dir / "b").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("torch_ddp.sst is a directory"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_directory(dir / "b" / "torch_ddp.sst"));
}

TEST(HostileOtherOutputs, AnEmptyValueIsRefusedNotTakenForNone) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"run", "--preset", "tiny", "--trace", ""},
                                             {"project", shipped_trace(), "--out", ""},
                                             {"view", ""},
                                             {"gui", "--screenshot", ""},
                                             {"perf", "--only", ""}}) {
    const test::CliResult r = test::cli(args);
    EXPECT_EQ(r.code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("empty value"), std::string::npos) << r.err;
  }
  // A list whose names are empty reads as none given: every strategy, every section.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"run", "--preset", "tiny", "--freeze", ",,"},
                                             {"bench", "--strategies", ",,"},
                                             {"bench", "--strategies", "ddp_bucketed,"},
                                             {"perf", "--only", "gui,,engine"}}) {
    const test::CliResult r = test::cli(args);
    EXPECT_EQ(r.code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("none of them empty"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(args[args.size() - 2]), std::string::npos) << r.err;
  }
  // A memory limit below one byte would round to none.
  const test::CliResult tiny_limit =
      test::cli({"run", "--preset", "tiny", "--memory-limit-mb", "1e-300"});
  EXPECT_EQ(tiny_limit.code, 2) << tiny_limit.err;
  EXPECT_NE(tiny_limit.err.find("--memory-limit-mb"), std::string::npos) << tiny_limit.err;
}

TEST(HostileOtherOutputs, ATraceDirectorySharesNoFileWithTheJsonAndKeepsOthersRankFiles) {
  const fs::path dir = test::test_temp_dir() / "t";
  auto with = [&](std::vector<std::string> extra, const char* world = "2") {
    std::vector<std::string> args = {
        "run",     "--strategy", "ddp_bucketed", "--world", world,
        "--steps", "1",          "--preset",     "tiny",    "--no-reference"};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::cli(args);
  };
  for (const char* name : {"trace.sst", "rank-1.json", "rank-0.et"}) {
    const test::CliResult r =
        with({"--trace", dir.string() + "/", "--json", (dir / name).string()});
    EXPECT_EQ(r.code, 2) << name << ": " << r.err;
    EXPECT_NE(r.err.find("give each output its own file"), std::string::npos) << r.err;
  }
  // A summary of its own name beside the trace is fine.
  fs::create_directories(dir);
  std::ofstream(dir / "rank-7.json") << R"({"traceName": "someone else's rank 7"})";
  ASSERT_EQ(with({"--trace", dir.string() + "/", "--json", (dir / "summary.json").string()}).code,
            0);
  // A wider run of ours leaves rank files that a narrower one removes; the user's stays.
  ASSERT_EQ(with({"--trace", dir.string() + "/"}, "4").code, 0);
  EXPECT_TRUE(fs::exists(dir / "rank-3.json"));
  ASSERT_EQ(with({"--trace", dir.string() + "/"}).code, 0);
  EXPECT_FALSE(fs::exists(dir / "rank-3.json"));
  EXPECT_TRUE(fs::exists(dir / "rank-7.json"));
  EXPECT_TRUE(fs::exists(dir / "summary.json"));
}

TEST(HostileOtherOutputs, AnOutputIsClaimedByOneWriterAtATime) {
  const fs::path dir = test::test_temp_dir();
  const std::string out = (dir / "o.json").string();
  {
    OutputClaim first(out);
    // flock is per open file: a second claim, as another process's would, is refused.
    try {
      OutputClaim second(out);
      ADD_FAILURE() << "a second writer claimed " << out;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("being written by another run (pid"), std::string::npos)
          << e.what();
    }
    const test::CliResult r = test::cli({"project", shipped_trace(), "--out", out});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  }
  // Released, and its never-written temporary gone.
  EXPECT_FALSE(fs::exists(out + ".partial"));
  EXPECT_EQ(test::cli({"project", shipped_trace(), "--out", out}).code, 0);
  EXPECT_FALSE(fs::exists(out + ".partial"));
  EXPECT_TRUE(fs::exists(out));
  OutputClaim again(out);  // after a write, claimable again
}

}  // namespace
}  // namespace shardscope
