// Checkpoint files: a half-written or damaged checkpoint is never taken as valid (the newest
// valid one is, and the reason for each skipped one is given); a checkpoint that another
// configuration cannot continue is refused naming the field; the full state assembled from
// shards covers every element exactly once.
#include "engine/state/checkpoint.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "engine/launch/stop_request.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

namespace fs = std::filesystem;

// A ddp_bucketed world-2 run that wrote checkpoints after steps 1, 2 and 3.
class CheckpointFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::test_temp_dir().string();
    config_ = test::tiny_config("ddp_bucketed", 2, 1);
    config_.steps = 3;
    config_.reference = false;
    config_.checkpoint_every = 1;
    config_.checkpoint_dir = dir_;
    const RunSummary s = run_training(config_);
    ASSERT_TRUE(s.ok) << s.failure;
    ASSERT_EQ(s.checkpoint, checkpoint_step_directory(dir_, 3));
  }

  std::string shard(int step, int rank) const {
    return checkpoint_step_directory(dir_, step) + "/rank-" + std::to_string(rank) + ".ckpt";
  }

  // The field of the ConfigError that `config` resuming from the newest checkpoint raises.
  std::string refusal(Config config) const {
    config.resume = dir_;
    try {
      check_resumable(config, find_checkpoint(dir_));
    } catch (const ConfigError& e) {
      return e.field();
    }
    return "";
  }

  std::string dir_;
  Config config_;
};

TEST_F(CheckpointFiles, TheNewestIsValidAndListsOneShardPerRank) {
  const CheckpointInfo info = find_checkpoint(dir_);
  EXPECT_EQ(info.step, 3);
  EXPECT_EQ(info.world, 2);
  EXPECT_EQ(info.strategy, "ddp_bucketed");
  EXPECT_EQ(info.shards.size(), 2u);
  std::ifstream latest(dir_ + "/latest");
  std::string name;
  latest >> name;
  EXPECT_EQ(name, "step-000003");
  // One step's folder can be named directly too.
  EXPECT_EQ(find_checkpoint(checkpoint_step_directory(dir_, 2)).step, 2);
}

// Sixty tiny steps once left 95 MB: only the newest K stay, and 0 keeps them all.
TEST(CheckpointKeep, OnlyTheNewestKStay) {
  for (int keep : {2, 0}) {
    const std::string dir = (test::test_temp_dir() / ("keep" + std::to_string(keep))).string();
    Config config = test::tiny_config("ddp_bucketed", 2, 1);
    config.steps = 5;
    config.reference = false;
    config.checkpoint_every = 1;
    config.checkpoint_keep = keep;
    config.checkpoint_dir = dir;
    ASSERT_TRUE(run_training(config).ok);
    std::vector<std::string> left;
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_directory()) left.push_back(entry.path().filename().string());
    std::sort(left.begin(), left.end());
    if (keep == 2) {
      EXPECT_EQ(left, (std::vector<std::string>{"step-000004", "step-000005"}));
    } else {
      EXPECT_EQ(left.size(), 5u);
    }
    EXPECT_EQ(find_checkpoint(dir).step, 5);
  }
}

TEST_F(CheckpointFiles, AFolderWithoutItsManifestIsSkippedAsHalfWritten) {
  fs::remove(checkpoint_step_directory(dir_, 3) + "/manifest.json");
  std::vector<std::string> skipped;
  EXPECT_EQ(find_checkpoint(dir_, &skipped).step, 2);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("no manifest"), std::string::npos) << skipped[0];
}

TEST_F(CheckpointFiles, ACorruptedOrTruncatedShardIsSkipped) {
  {
    std::fstream f(shard(3, 1), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x5a');
  }
  fs::resize_file(shard(2, 0), fs::file_size(shard(2, 0)) / 2);
  std::vector<std::string> skipped;
  EXPECT_EQ(find_checkpoint(dir_, &skipped).step, 1);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[0].find("checksum"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find("bytes"), std::string::npos) << skipped[1];
}

// The FNV-1a of a shard, as a forger would redo it in the manifest.
std::string fnv1a_text(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

// A shard changed with its manifest's size and checksum redone to match: the zip's own CRC-32s
// (a flipped byte) and its being whole (a cut) still give it away, before any rank loads it.
TEST_F(CheckpointFiles, AShardChangedBehindItsManifestIsSkipped) {
  const std::string path = shard(3, 0),
                    manifest_path = checkpoint_step_directory(dir_, 3) + "/manifest.json";
  for (const bool cut : {false, true}) {
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    if (cut) {
      bytes.resize(bytes.size() / 2);
    } else {
      bytes[bytes.size() / 2] ^= 0x40;  // inside a tensor's record
    }
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    nlohmann::json manifest;
    std::ifstream(manifest_path) >> manifest;
    for (auto& s : manifest.at("shards")) {
      if (s.at("file") == "rank-0.ckpt") {
        s["bytes"] = bytes.size();
        s["fnv1a"] = fnv1a_text(bytes);
      }
    }
    std::ofstream(manifest_path, std::ios::trunc) << manifest.dump();
    std::vector<std::string> skipped;
    EXPECT_EQ(find_checkpoint(dir_, &skipped).step, 2);
    ASSERT_EQ(skipped.size(), 1u);
    EXPECT_NE(skipped[0].find(cut ? "not a readable PyTorch file" : "CRC-32"), std::string::npos)
        << skipped[0];
  }
}

// A manifest that is a FIFO once blocked --resume forever (SIGTERM could not stop it); a folder
// threw from inside the stream. Both are skipped, said why.
TEST_F(CheckpointFiles, AManifestThatIsNotAFileIsSkippedNotWaitedOn) {
  for (const bool fifo : {true, false}) {
    const std::string path = checkpoint_step_directory(dir_, 3) + "/manifest.json";
    fs::remove_all(path);
    if (fifo) {
      ASSERT_EQ(mkfifo(path.c_str(), 0644), 0);
    } else {
      fs::create_directory(path);
    }
    std::vector<std::string> skipped;
    EXPECT_EQ(find_checkpoint(dir_, &skipped).step, 2);
    ASSERT_EQ(skipped.size(), 1u);
    EXPECT_NE(skipped[0].find("not a regular file"), std::string::npos) << skipped[0];
  }
}

// The newest manifest edited as a hostile user would; it must be skipped with its reason and the
// checkpoint before it taken, never trusted or crashed on.
class HostileManifest : public CheckpointFiles,
                        public testing::WithParamInterface<std::pair<std::string, std::string>> {};

TEST_P(HostileManifest, IsSkippedForThePreviousCheckpoint) {
  const std::string path = checkpoint_step_directory(dir_, 3) + "/manifest.json";
  nlohmann::json manifest;
  std::ifstream(path) >> manifest;
  manifest.merge_patch(nlohmann::json::parse(GetParam().first));
  std::ofstream(path) << manifest.dump();
  std::vector<std::string> skipped;
  const CheckpointInfo info = find_checkpoint(dir_, &skipped);
  EXPECT_EQ(info.step, 2);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find(GetParam().second), std::string::npos) << skipped[0];
}

INSTANTIATE_TEST_SUITE_P(
    Edits, HostileManifest,
    testing::Values(
        std::make_pair(R"({"step":-5})", "says step -5"),
        std::make_pair(R"({"step":0})", "says step 0"),
        std::make_pair(R"({"step":7})", "says step 7, its folder step-000003"),
        std::make_pair(R"({"world":0})", "says world 0"),
        std::make_pair(R"({"shards":[{"file":"..","bytes":1,"fnv1a":"0"}]})", "outside it ('..')"),
        std::make_pair(R"({"shards":[{"file":".","bytes":1,"fnv1a":"0"}]})", "outside it ('.')"),
        std::make_pair(R"({"shards":[{"file":"../step-000002/rank-0.ckpt"}]})", "outside it"),
        std::make_pair(R"({"shards":[{"file":"","bytes":1,"fnv1a":"0"}]})", "outside it"),
        std::make_pair(R"({"world":1099511627776})", "says world 1099511627776"),
        std::make_pair(R"({"step":4294967299})", "says step 4294967299"),
        std::make_pair(R"({"config":"x"})", "config is not a configuration"),
        std::make_pair(R"({"config":{"model":{"layers":"two"}}})", "config is not a configuration"),
        std::make_pair(R"({"step":"three"})", "malformed"),
        std::make_pair(R"({"shards":7})", "malformed")));

TEST_F(CheckpointFiles, AShardThatIsAFolderIsSkipped) {
  const std::string folder = checkpoint_step_directory(dir_, 3);
  fs::remove(folder + "/rank-1.ckpt");
  fs::create_directory(folder + "/rank-1.ckpt");
  std::vector<std::string> skipped;
  EXPECT_EQ(find_checkpoint(dir_, &skipped).step, 2);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("rank-1.ckpt is not a file"), std::string::npos) << skipped[0];
}

TEST_F(CheckpointFiles, ASecondRunOnTheSameDirectoryIsRefusedAndTouchesNothing) {
  const std::string manifest = checkpoint_step_directory(dir_, 3) + "/manifest.json";
  const auto written = fs::last_write_time(manifest);
  CheckpointDirectoryLock first_run(dir_);
  try {
    run_training(config_);
    FAIL() << "a second run started on a directory in use";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "checkpoint_dir");
    EXPECT_NE(std::string(e.what()).find("in use by another run (pid " + std::to_string(getpid())),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(fs::last_write_time(manifest), written);
}

TEST_F(CheckpointFiles, NoValidCheckpointIsAnErrorOnResume) {
  for (int step = 1; step <= 3; ++step) fs::remove(shard(step, 0));
  try {
    find_checkpoint(dir_);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "resume");
    EXPECT_NE(std::string(e.what()).find("rank-0.ckpt is missing"), std::string::npos);
  }
  EXPECT_THROW(find_checkpoint(dir_ + "/does-not-exist"), ConfigError);
  Config resumed = config_;
  resumed.resume = dir_;
  EXPECT_THROW(run_training(resumed), ConfigError);
}

TEST_F(CheckpointFiles, AConfigurationThatTrainsDifferentlyIsRefusedByField) {
  Config c = config_;
  c.steps = 5;
  EXPECT_EQ(refusal(c), "");  // a constant schedule may train on past the old end
  c = config_;
  c.seed = 7;
  EXPECT_EQ(refusal(c), "seed");
  c = config_;
  c.model.d_model = 32;
  EXPECT_EQ(refusal(c), "model.d_model");
  c = config_;
  c.optimizer.lr = 0.5;
  EXPECT_EQ(refusal(c), "optimizer.lr");
  c = config_;
  c.micro_batch = 3;
  EXPECT_EQ(refusal(c), "global_batch");
  c = config_;
  c.steps = 5;
  c.world = 4;
  c.micro_batch = 1;  // the same 4 sequences per step: allowed
  EXPECT_EQ(refusal(c), "");
  c = config_;
  EXPECT_EQ(refusal(c), "steps");  // at step 3 of 3: nothing left
  c = config_;
  c.steps = 5;
  c.optimizer.schedule = "cosine";
  c.optimizer.warmup_steps = 0;
  EXPECT_EQ(refusal(c), "optimizer.schedule");
}

TEST_F(CheckpointFiles, ABadCheckpointDirectoryIsBadInput) {
  Config c = config_;
  c.checkpoint_dir = shard(3, 0) + "/inside-a-file";
  try {
    run_training(c);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "checkpoint_dir");
  }
}

std::vector<std::pair<std::string, std::vector<int64_t>>> two_parameters() {
  return {{"w", {4, 6}}, {"b", {6}}};
}

StatePiece piece(const std::string& name, int dim, int64_t begin, int64_t length, int64_t numel) {
  StatePiece p;
  p.region = {name, dim, begin, length};
  p.value = torch::arange(numel, torch::kFloat);
  return p;
}

TEST(TrainingState, PiecesAlongRowsColumnsAndFlatRangesAssembleTheFullTensors) {
  TrainingState state(two_parameters());
  state.add(piece("w", 1, 0, 3, 12));  // columns 0..2
  state.add(piece("w", 1, 3, 3, 12));  // columns 3..5
  state.add(piece("b", -1, 0, 2, 2));
  state.add(piece("b", -1, 2, 4, 4));
  state.check_complete();
  const auto& w = state.parameter("w").value;
  EXPECT_EQ(w[1][0].item<float>(), 3.0f);  // row 1 of the first column block [4, 3]
  EXPECT_EQ(w[1][4].item<float>(), 4.0f);
  EXPECT_EQ(state.parameter("b").value[3].item<float>(), 1.0f);
}

TEST(TrainingState, OverlapsGapsAndStrangersAreErrors) {
  TrainingState state(two_parameters());
  state.add(piece("w", 0, 0, 2, 12));
  EXPECT_THROW(state.add(piece("w", 0, 1, 2, 12)), std::runtime_error);  // overlaps row 1
  EXPECT_THROW(state.add(piece("w", 0, 3, 2, 12)), std::runtime_error);  // past row 3
  EXPECT_THROW(state.add(piece("w", 0, 2, 2, 5)), std::runtime_error);   // too few values
  EXPECT_THROW(state.add(piece("x", -1, 0, 1, 1)), std::runtime_error);  // no such parameter
  EXPECT_THROW(state.check_complete(), std::runtime_error);              // rows 2..3, b missing
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

// SIGTERM while the single-device reference trained once exited with "no checkpoint was written
// (no --checkpoint-dir)" after 12 of 12 steps, --checkpoint-dir given and empty (issue 33): the
// finished training is now checkpointed before the reference starts, whatever --checkpoint-every.
TEST(StopDuringReference, TheFinishedTrainingIsCheckpointedFirst) {
  const std::string dir = (test::test_temp_dir() / "ck").string();
  Config config = test::tiny_config("ddp_bucketed", 2, 1);
  config.steps = 3;
  config.checkpoint_every = 2;  // step 3 is not due: it is the last
  config.checkpoint_dir = dir;
  RunCallbacks callbacks;
  callbacks.on_phase = [](const std::string& phase) {
    if (phase == "reference") request_stop(SIGTERM);
  };
  const RunSummary s = run_training(config, callbacks);
  clear_stop_request();
  ASSERT_TRUE(s.ok) << s.failure;
  EXPECT_EQ(s.stopped_by_signal, SIGTERM);
  EXPECT_FALSE(s.reference.has_value());
  EXPECT_EQ(s.checkpoint, checkpoint_step_directory(dir, 3));
  EXPECT_EQ(find_checkpoint(dir).step, 3);
  EXPECT_TRUE(fs::exists(checkpoint_step_directory(dir, 2)));
}

}  // namespace
}  // namespace shardscope
