// The hostile suite's checkpoint-directory cases (issue 33): a checkpoint directory is the user's,
// and retention must remove nothing it did not write, never through a symlink.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/cli_runner.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> train(const fs::path& dir, int steps, int keep) {
  return {"run",
          "--strategy",
          "ddp_bucketed",
          "--world",
          "2",
          "--steps",
          std::to_string(steps),
          "--preset",
          "tiny",
          "--no-reference",
          "--checkpoint-every",
          "1",
          "--checkpoint-keep",
          std::to_string(keep),
          "--checkpoint-dir",
          dir.string()};
}

// `ln -s ../out ck/step-000000` once made retention delete out/precious.txt, exit 0.
TEST(HostileCheckpointDir, ASymlinkUnderAStepNameIsRefusedAndWhatItPointsAtStays) {
  const fs::path root = test::test_temp_dir();
  write(root / "out" / "precious.txt", "x");
  fs::create_directories(root / "ck");
  fs::create_directory_symlink("../out", root / "ck" / "step-000000");
  const test::CliResult r = test::cli(train(root / "ck", 5, 1));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("step-000000"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("symlink"), std::string::npos) << r.err;
  EXPECT_EQ(read(root / "out" / "precious.txt"), "x");
  EXPECT_TRUE(fs::is_symlink(root / "ck" / "step-000000"));
}

// The user's ck/step-1..3 once counted as checkpoints: with --checkpoint-keep 1 each new
// checkpoint was deleted right after it was written, `latest` named a missing folder, --resume
// found nothing, and a user's file inside a step folder went with it.
TEST(HostileCheckpointDir, TheUsersFoldersNeitherCountNorGo) {
  const fs::path ck = test::test_temp_dir() / "ck";
  for (const char* name : {"step-1", "step-2", "step-3"}) write(ck / name / "notes.txt", name);
  write(ck / "step-000001" / "mine.txt", "mine");
  const test::CliResult r = test::cli(train(ck, 3, 1));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name : {"step-1", "step-2", "step-3"})
    EXPECT_EQ(read(ck / name / "notes.txt"), name);
  EXPECT_EQ(read(ck / "step-000001" / "mine.txt"), "mine");
  EXPECT_EQ(read(ck / "latest"), "step-000003\n");
  EXPECT_TRUE(fs::exists(ck / "step-000003" / "manifest.json"));
  EXPECT_FALSE(fs::exists(ck / "step-000002")) << "ours, older than the one kept";
  const test::CliResult resumed =
      test::cli({"run", "--strategy", "ddp_bucketed", "--world", "2", "--steps", "4", "--preset",
                 "tiny", "--no-reference", "--resume", ck.string()});
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("step 3"), std::string::npos) << resumed.out;
}

// Hostile sweep 3 (2026-11-28): an output written among the checkpoints (--json over `latest`,
// --export-weights over a shard, --trace over a manifest) exited 0 and left the newest checkpoint
// unusable. Refused before training, by --checkpoint-dir and by --resume (a directory, or one
// step's folder, whose directory is protected too); a file of the user's beside them is fine.
TEST(HostileCheckpointDir, NoOutputLandsOnACheckpointsFiles) {
  const fs::path dir = test::test_temp_dir(), ck = dir / "ck";
  ASSERT_EQ(test::cli(train(ck, 2, 0)).code, 0);
  const std::string latest = read(ck / "latest"), manifest = read(ck / "step-000002/manifest.json");
  const auto with = [](std::vector<std::string> args, std::vector<std::string> extra) {
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::vector<std::string> resume = {
      "run",     "--strategy", "ddp_bucketed", "--world", "2",
      "--steps", "3",          "--preset",     "tiny",    "--no-reference"};
  for (const auto& [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {with(train(ck, 3, 0), {"--json", (ck / "latest").string()}), "--json"},
           {with(resume, {"--resume", ck.string(), "--json", (ck / "latest").string()}), "--json"},
           {with(resume,
                 {"--resume", (ck / "step-000002").string(), "--json", (ck / "latest").string()}),
            "--json"},
           {with(resume, {"--resume", ck.string(), "--export-weights",
                          (ck / "step-000002/rank-0.ckpt").string()}),
            "--export-weights"},
           {with(resume,
                 {"--resume", ck.string(), "--trace", (ck / "step-000002/manifest.json").string()}),
            "--trace"},
           {with(resume, {"--resume", ck.string(), "--trace", ck.string() + "/"}), "--trace"}}) {
    const test::CliResult r = test::cli(args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(flag + ": "), std::string::npos) << r.err;
    // "a checkpoint's file in --resume", or for the directory itself "is the --resume input".
    EXPECT_TRUE(r.err.find("checkpoint") != std::string::npos ||
                r.err.find("--resume input") != std::string::npos)
        << r.err;
  }
  EXPECT_EQ(read(ck / "latest"), latest);
  EXPECT_EQ(read(ck / "step-000002/manifest.json"), manifest);
  const test::CliResult beside =
      test::cli(with(resume, {"--resume", ck.string(), "--json", (ck / "summary.json").string()}));
  EXPECT_EQ(beside.code, 0) << beside.err;
}

// A config nested 150,000 arrays deep (a 300 KB file) once overflowed the stack (rc 139) in run,
// a worker and collect: refused while parsing.
TEST(HostileCheckpointDir, AConfigNestedPastAnyConfigIsRefusedWhileParsing) {
  const fs::path dir = test::test_temp_dir();
  const int deep = 150000;
  write(dir / "deep.json", "{\"model\":" + std::string(deep, '[') + std::string(deep, ']') + "}");
  const test::CliResult r = test::cli({"run", "--config", (dir / "deep.json").string()});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("nests deeper than 64 levels"), std::string::npos) << r.err;
  fs::create_directories(dir / "out");
  fs::copy_file(dir / "deep.json", dir / "out/config.json");
  const test::CliResult collected = test::cli({"collect", (dir / "out").string()});
  EXPECT_EQ(collected.code, 2) << collected.err;
  EXPECT_NE(collected.err.find("nests deeper"), std::string::npos) << collected.err;
}

}  // namespace
}  // namespace shardscope
