// The hostile-input suite: what an adversarial user feeds the command line, each case with the
// exit code it must give and a phrase its message must contain. Together with the bad-config
// table (tests/support/bad_configs.cpp, run through `run --config` in cli_test.cpp) and the bad
// flags there, it is the table of "nothing crashes, nothing hangs, the message names the field or
// file". This file holds the cases about files: traces for report/view/project, checkpoint
// folders for --resume, and output paths.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/cli_main.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code;
  std::string out, err;
};

Outcome cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = cli::cli_main(args, out, err);
  return {code, out.str(), err.str()};
}

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
  const Outcome r = cli(args);
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
  const Outcome r =
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
  const Outcome r = cli({"run", "--strategy", "ddp_bucketed", "--world", "2", "--steps", "3",
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
  const Outcome r = cli({"run", "--resume", file.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no such directory"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace shardscope
