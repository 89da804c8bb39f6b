// The hostile suite's checkpoint-directory cases (issue 33): a checkpoint directory is the user's,
// and retention must remove nothing it did not write, never through a symlink.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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

}  // namespace
}  // namespace shardscope
