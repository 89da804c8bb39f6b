// Checkpoint retention against a user's checkpoint directory (issue 33): random trees of the
// user's files, folders and symlinks, random --checkpoint-keep, several runs in a row. Nothing
// outside what shardscope wrote is ever removed or changed, and the newest `keep` checkpoints of a
// run always resume.
#include "engine/state/checkpoint_retention.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "engine/state/checkpoint.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

std::string step_folder(int step) {
  return fs::path(checkpoint_step_directory("", step)).filename().string();
}

// Everything under `root` (not following symlinks): path -> what it is and holds.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> seen;
  if (!fs::exists(fs::symlink_status(root))) return seen;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path& p = it->path();
    const std::string key = fs::relative(p, root).string();
    if (fs::is_symlink(it->symlink_status())) {
      seen[key] = "link:" + fs::read_symlink(p).string();
    } else if (it->is_directory()) {
      seen[key] = "dir";
    } else {
      std::ifstream in(p, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      seen[key] = "file:" + text.str();
    }
  }
  return seen;
}

// A random tree of the user's things in `ck` and beside it; returns whether it holds a symlink or
// a file under a step folder's name (which a run must refuse; only planted where `may_refuse`).
bool plant_user_tree(std::mt19937& rng, const fs::path& ck, const fs::path& outside,
                     bool may_refuse) {
  fs::create_directories(ck);
  fs::create_directories(outside / "data");
  std::ofstream(outside / "data" / "precious.txt") << "precious";
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  bool refused = false;
  const int items = 2 + pick(6);
  for (int i = 0; i < items; ++i) {
    const int step = pick(8);
    const std::string tag = std::to_string(i);
    switch (pick(8)) {
      case 0:
        std::ofstream(ck / ("notes-" + tag + ".txt")) << tag;
        break;
      case 1: {  // the user's own folder under one of our names, with their file inside
        fs::create_directories(ck / step_folder(step));
        std::ofstream(ck / step_folder(step) / ("mine-" + tag + ".txt")) << tag;
        break;
      }
      case 2: {  // names that look like ours but are not
        const std::string name = pick(2) ? "step-" + std::to_string(step) : step_folder(step) + "x";
        fs::create_directories(ck / name);
        std::ofstream(ck / name / "notes.txt") << tag;
        break;
      }
      case 3:
        fs::create_directory_symlink(outside / "data", ck / ("link-" + tag));
        break;
      case 4:
        if (may_refuse && !fs::exists(fs::symlink_status(ck / step_folder(step)))) {
          fs::create_directory_symlink(outside / "data", ck / step_folder(step));
          refused = true;
        }
        break;
      case 5:
        if (may_refuse && !fs::exists(fs::symlink_status(ck / step_folder(step)))) {
          std::ofstream(ck / step_folder(step)) << "a file, not a folder";
          refused = true;
        }
        break;
      case 6: {  // a folder of ours from an earlier run that kept it (marker and all)
        fs::create_directories(ck / "other");
        std::ofstream(ck / "other" / "README") << tag;
        break;
      }
      default:
        std::ofstream(ck / "latest-notes") << tag;
        break;
    }
  }
  return refused;
}

// What a run may add to the user's tree: its own files in step folders (its shards, manifest,
// marker), `latest`, `.lock`, and its own step folders.
bool written_by_us(const std::string& relative) {
  const fs::path p(relative);
  const std::string name = p.filename().string();
  if (relative == "latest" || relative == ".lock") return true;
  if (checkpoint_folder_step(relative)) return true;
  return p.has_parent_path() && checkpoint_folder_step(p.parent_path().string()) &&
         (name == "manifest.json" || name == ".shardscope-checkpoint" ||
          (name.rfind("rank-", 0) == 0 && name.size() > 10 &&
           name.compare(name.size() - 5, 5, ".ckpt") == 0));
}

TEST(CheckpointRetention, NeverRemovesWhatItDidNotWriteAndTheNewestKResume) {
  std::mt19937 rng(20261125);
  int runs = 0, refusals = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const fs::path base = test::test_temp_dir() / ("trial-" + std::to_string(trial));
    const fs::path ck = base / "ck", outside = base / "outside";
    const bool refused = plant_user_tree(rng, ck, outside, trial % 4 == 0);
    const auto user_ck = snapshot(ck);
    const auto user_outside = snapshot(outside);
    const int keep = static_cast<int>(rng() % 4);
    const int first_steps = 2 + static_cast<int>(rng() % 4);
    for (int steps : {first_steps, first_steps + 1 + static_cast<int>(rng() % 2)}) {
      Config config = test::tiny_config("ddp_bucketed", 2, 1);
      config.steps = steps;
      config.reference = false;
      config.checkpoint_every = 1;
      config.checkpoint_keep = keep;
      config.checkpoint_dir = ck.string();
      bool ran = false;
      try {
        ran = run_training(config).ok;
      } catch (const ConfigError& e) {
        EXPECT_TRUE(refused) << "trial " << trial << ": " << e.what();
        EXPECT_EQ(e.field(), "checkpoint_dir");
        ++refusals;
      }
      ++runs;
      EXPECT_EQ(ran, !refused) << "trial " << trial;
      // Every one of the user's things is still there, as it was.
      const auto now = snapshot(ck);
      for (const auto& [path, what] : user_ck) {
        const auto found = now.find(path);
        ASSERT_TRUE(found != now.end()) << "trial " << trial << ": " << path << " was removed";
        EXPECT_EQ(found->second, what) << "trial " << trial << ": " << path << " changed";
      }
      for (const auto& [path, what] : now) {
        if (!user_ck.count(path)) {
          EXPECT_TRUE(written_by_us(path)) << "trial " << trial << ": " << path;
        }
      }
      EXPECT_EQ(snapshot(outside), user_outside) << "trial " << trial;
      if (!ran) continue;
      // The newest `keep` (every one for 0) of this run resume.
      EXPECT_EQ(find_checkpoint(ck.string()).step, steps) << "trial " << trial;
      const int oldest = keep == 0 ? 1 : std::max(1, steps - keep + 1);
      for (int s = oldest; s <= steps; ++s) {
        EXPECT_EQ(find_checkpoint(checkpoint_step_directory(ck.string(), s)).step, s)
            << "trial " << trial << " keep " << keep << " step " << s;
      }
    }
  }
  // The seed gives both kinds of tree: some that must be refused, most that must run.
  EXPECT_GT(refusals, 0);
  EXPECT_GT(runs - refusals, runs / 2);
}

TEST(CheckpointRetention, StepFolderNamesAreExactlyOurs) {
  EXPECT_EQ(checkpoint_folder_step("step-000001"), 1);
  EXPECT_EQ(checkpoint_folder_step("step-1234567"), 1234567);
  EXPECT_FALSE(checkpoint_folder_step("step-1"));
  EXPECT_FALSE(checkpoint_folder_step("step-0000001"));
  EXPECT_FALSE(checkpoint_folder_step("step-000001x"));
  EXPECT_FALSE(checkpoint_folder_step("step-00000a"));
  EXPECT_FALSE(checkpoint_folder_step("latest"));
}

}  // namespace
}  // namespace shardscope
