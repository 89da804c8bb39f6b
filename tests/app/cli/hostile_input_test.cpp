// The hostile-input suite: what an adversarial user feeds the command line, each case with the
// exit code it must give and a phrase its message must contain. Together with the bad-config
// table (tests/support/bad_configs.cpp, run through `run --config` in cli_test.cpp) and the bad
// flags there, it is the table of "nothing crashes, nothing hangs, the message names the field or
// file". This file holds the cases about files: traces for report/view/project, checkpoint
// folders for --resume, and output paths.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/cli/cli_main.h"
#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

using test::cli;
using CliResult = test::CliResult;

namespace fs = std::filesystem;

std::string asset(const std::string& name) {
  return std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/" + name;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---- trace files, for each command that reads one ----

struct BadTrace {
  std::string name;      // also the case's name
  std::string contents;  // "<dir>": a directory; "<missing>": no file at all
  std::string phrase;
};

std::vector<BadTrace> bad_traces() {
  const std::string real = read_all(asset("ddp_bucketed-w2.sst"));
  std::string future = real;
  future[8] = 99;  // the version field
  std::string flipped = real;
  flipped[flipped.size() / 2] ^= 0x5a;
  return {
      {"empty", "", "the file is empty"},
      {"blank", " \n\t\n", "only white space"},
      {"directory", "<dir>", "is a directory"},
      {"missing", "<missing>", "cannot open trace file"},
      {"text", "hello, world\n", "not a trace"},
      {"png", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16), "starts with SSTRACE"},
      {"cut_magic", "SSTRA", "truncated trace"},
      {"header_only", real.substr(0, 32), "truncated trace"},
      {"cut_payload", real.substr(0, real.size() / 2), "truncated trace"},
      {"future_version", future, "unsupported trace version 99"},
      {"flipped_byte", flipped, "checksum mismatch"},
      {"json_cut", R"({"traceEvents": [{"ph": "X", "pid": 1)", "JSON"},
      {"json_wrong_type", R"({"traceEvents": 3})", "traceEvents"},
  };
}

struct TraceCommandCase {
  BadTrace trace;
  std::vector<std::string> command;  // the file goes last
};

std::vector<TraceCommandCase> trace_command_cases() {
  std::vector<TraceCommandCase> cases;
  for (const auto& trace : bad_traces()) {
    cases.push_back({trace, {"report"}});
    cases.push_back({trace, {"view"}});
    cases.push_back({trace, {"project", "--hardware", "8xH100", "--compute-scale", "0.5"}});
  }
  return cases;
}

class HostileTraceFile : public testing::TestWithParam<TraceCommandCase> {};

TEST_P(HostileTraceFile, ExitsTwoNamingWhatIsWrong) {
  const TraceCommandCase& c = GetParam();
  const fs::path path = test::test_temp_dir() / (c.trace.name + ".sst");
  if (c.trace.contents == "<dir>") {
    fs::create_directories(path);
  } else if (c.trace.contents != "<missing>") {
    std::ofstream(path, std::ios::binary) << c.trace.contents;
  }
  std::vector<std::string> args = c.command;
  args.push_back(path.string());
  const CliResult r = cli(args);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(c.trace.phrase), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(path.filename().string()), std::string::npos)
      << "the message names the file: " << r.err;
}

INSTANTIATE_TEST_SUITE_P(Table, HostileTraceFile, testing::ValuesIn(trace_command_cases()),
                         [](const auto& info) {
                           return info.param.command[0] + "_" + info.param.trace.name;
                         });

// A trace with no ranks opens for reading (there is nothing wrong with it as a file), but there
// is nothing to project.
TEST(HostileTraceFile, NoRanksReportsButDoesNotProject) {
  const fs::path path = test::test_temp_dir() / "empty.json";
  std::ofstream(path) << R"({"traceEvents":[]})";
  EXPECT_EQ(cli({"report", path.string()}).code, 0);
  const CliResult r =
      cli({"project", path.string(), "--hardware", "8xH100", "--compute-scale", "0.5"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no ranks"), std::string::npos) << r.err;
}

// ---- checkpoint folders for --resume ----

struct BadCheckpoint {
  std::string name;
  // Files to create under the folder given to --resume: path -> contents ("<dir>": a folder).
  std::vector<std::pair<std::string, std::string>> files;
  std::string phrase;
};

std::vector<BadCheckpoint> bad_checkpoints() {
  const std::string manifest_head =
      R"({"format":"shardscope-checkpoint","version":1,"world":2,"strategy":"ddp_bucketed",)";
  return {
      {"empty_folder", {}, "no valid checkpoint"},
      {"only_a_stray_file", {{"notes.txt", "hi"}}, "no valid checkpoint"},
      {"step_folder_without_manifest", {{"step-000002/rank-0.ckpt", "x"}}, "no manifest"},
      {"manifest_not_json", {{"step-000002/manifest.json", "{{{"}}, "not a shardscope checkpoint"},
      {"manifest_of_something_else",
       {{"step-000002/manifest.json", R"({"format":"zip"})"}},
       "not a shardscope checkpoint"},
      {"manifest_future_version",
       {{"step-000002/manifest.json", R"({"format":"shardscope-checkpoint","version":9})"}},
       "version 9"},
      {"manifest_negative_step",
       {{"step-000002/manifest.json", manifest_head + R"("step":-5,"config":{},"shards":[]})"}},
       "says step -5"},
      {"manifest_escapes_folder",
       {{"step-000002/manifest.json",
         manifest_head +
             R"("step":2,"config":{},"shards":[{"file":"..","bytes":1,"fnv1a":"0"}]})"}},
       "outside it"},
      {"shard_missing",
       {{"step-000002/manifest.json",
         manifest_head +
             R"("step":2,"config":{},"shards":[{"file":"rank-0.ckpt","bytes":1,"fnv1a":"0"}]})"}},
       "rank-0.ckpt is missing"},
      {"shard_is_a_folder",
       {{"step-000002/manifest.json",
         manifest_head +
             R"("step":2,"config":{},"shards":[{"file":"rank-0.ckpt","bytes":1,"fnv1a":"0"}]})"},
        {"step-000002/rank-0.ckpt", "<dir>"}},
       "rank-0.ckpt is not a file"},
      {"shard_wrong_size",
       {{"step-000002/manifest.json",
         manifest_head +
             R"("step":2,"config":{},"shards":[{"file":"rank-0.ckpt","bytes":99,"fnv1a":"0"}]})"},
        {"step-000002/rank-0.ckpt", "abc"}},
       "the manifest says 99"},
      {"shard_corrupted",
       {{"step-000002/manifest.json",
         manifest_head +
             R"("step":2,"config":{},"shards":[{"file":"rank-0.ckpt","bytes":3,"fnv1a":"0"}]})"},
        {"step-000002/rank-0.ckpt", "abc"}},
       "does not match its checksum"},
  };
}

class HostileCheckpoint : public testing::TestWithParam<BadCheckpoint> {};

TEST_P(HostileCheckpoint, ResumeExitsTwoNamingTheReason) {
  const fs::path root = test::test_temp_dir() / "ck";
  fs::create_directories(root);
  for (const auto& [file, contents] : GetParam().files) {
    fs::create_directories((root / file).parent_path());
    if (contents == "<dir>") {
      fs::create_directories(root / file);
    } else {
      std::ofstream(root / file, std::ios::binary) << contents;
    }
  }
  const CliResult r = cli({"run", "--strategy", "ddp_bucketed", "--world", "2", "--steps", "3",
                           "--resume", root.string(), "--no-reference"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--resume"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(GetParam().phrase), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("step  loss"), std::string::npos) << "training started";
}

INSTANTIATE_TEST_SUITE_P(Table, HostileCheckpoint, testing::ValuesIn(bad_checkpoints()),
                         [](const auto& info) { return info.param.name; });

TEST(HostileCheckpoint, ResumeFromAFileIsNotADirectory) {
  const fs::path file = test::test_temp_dir() / "ck.txt";
  std::ofstream(file) << "x";
  const CliResult r = cli({"run", "--resume", file.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no such directory"), std::string::npos) << r.err;
}

// ---- output paths, checked before training ----

struct BadOutput {
  std::string name;
  std::string flag;
  std::string target;  // under the test's folder; "file" there is a regular file
  std::string phrase;
};

class HostileOutputPath : public testing::TestWithParam<BadOutput> {};

TEST_P(HostileOutputPath, IsRefusedBeforeTraining) {
  const fs::path dir = test::test_temp_dir();
  std::ofstream(dir / "file") << "x";
  fs::create_directories(dir / "folder");
  const std::string target = (dir / GetParam().target).string();
  const CliResult r = cli({"run", "--steps", "1", "--no-reference", GetParam().flag, target});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(GetParam().flag), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(GetParam().phrase), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("step  loss"), std::string::npos) << "training started";
}

INSTANTIATE_TEST_SUITE_P(
    Table, HostileOutputPath,
    testing::Values(
        BadOutput{"json_is_a_folder", "--json", "folder", "is a directory"},
        BadOutput{"json_under_a_file", "--json", "file/x.json", "cannot create"},
        BadOutput{"weights_is_a_folder", "--export-weights", "folder", "is a directory"},
        BadOutput{"weights_under_a_file", "--export-weights", "file/w.pt", "cannot create"},
        BadOutput{"safetensors_under_a_file", "--export-weights", "file/w.safetensors",
                  "cannot create"},
        BadOutput{"trace_under_a_file", "--trace", "file/t.sst", "cannot create"},
        BadOutput{"trace_folder_is_a_file", "--trace", "file/", "is a file"},
        BadOutput{"trace_folder_under_a_file", "--trace", "file/deeper/", "is a file"}),
    [](const auto& info) { return info.param.name; });

TEST(HostileOutputPath, MissingFoldersAreCreated) {
  const fs::path dir = test::test_temp_dir() / "a" / "b";
  const CliResult r = cli({"run", "--steps", "1", "--no-reference", "--json",
                           (dir / "x.json").string(), "--trace", (dir / "t" / "").string()});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "x.json"));
  EXPECT_TRUE(fs::exists(dir / "t" / "trace.sst"));
}

// ---- a full disk at the end of a run ----

// A 16 KiB tmpfs, filled: the run's summary is printed anyway, every other output is written,
// and the one that did not fit is named, exit 1. Needs mount (root); skipped elsewhere.
TEST(HostileDisk, AFullDiskLosesOnlyTheFileThatDidNotFit) {
  const fs::path dir = test::test_temp_dir();
  const fs::path full = dir / "full";
  fs::create_directories(full);
  const std::string mount =
      "mount -t tmpfs -o size=16k shardscope-full " + full.string() + " 2>/dev/null";
  if (std::system(mount.c_str()) != 0) GTEST_SKIP() << "mount is not allowed here (needs root)";
  struct Unmount {
    std::string path;
    ~Unmount() { std::system(("umount " + path).c_str()); }
  } unmount{full.string()};
  {
    std::ofstream filler(full / "filler", std::ios::binary);
    const std::string block(4096, 'x');
    for (int i = 0; i < 8 && filler; ++i) filler << block;
  }
  const std::string json = (full / "x.json").string();
  const fs::path trace = dir / "t.sst", weights = dir / "w.pt";
  const CliResult r =
      cli({"run", "--strategy", "ddp_bucketed", "--world", "2", "--steps", "2", "--json", json,
           "--trace", trace.string(), "--export-weights", weights.string()});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("ranks agree: yes"), std::string::npos) << "the summary comes first";
  EXPECT_NE(r.out.find("reference (single device"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("cannot write --json " + json), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(trace)) << "the outputs after the failing one are written";
  EXPECT_TRUE(fs::exists(weights));
  EXPECT_FALSE(fs::exists(json));
}

}  // namespace
}  // namespace shardscope
