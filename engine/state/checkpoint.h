#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/state/training_state.h"
#include "engine/train/config.h"

namespace shardscope {

// A checkpoint directory holds one folder per saved step, D/step-NNNNNN/, with one shard file
// per rank (the regions that rank writes: see StateBinding) and a manifest written last, after
// every shard, listing each shard's size and checksum; D/latest names the newest. A folder whose
// manifest is missing or whose shards do not match it was interrupted while being written and is
// never taken as valid.
struct CheckpointInfo {
  std::string directory;  // D/step-NNNNNN
  int step = 0;           // optimizer steps completed when it was written
  int world = 0;
  std::string strategy;
  std::string config_json;  // the configuration of the run that wrote it
  std::vector<std::string> shards;
};

std::string checkpoint_step_directory(const std::string& root, int step);
// The checkpoint directory a --resume path names: the path, or the directory above a step's
// folder (one holding a manifest).
std::string checkpoint_root_of(const std::string& path);
// Whether `relative`, a path inside a checkpoint directory, is what its checkpoints keep there:
// `latest`, `.lock`, a step's folder or anything in one. An output there would ruin a checkpoint.
bool is_checkpoint_entry(const std::string& relative);
// Creates `root` if needed and checks that it can be written (ConfigError on "checkpoint_dir"),
// so a bad directory is reported before training rather than at the first checkpoint.
void check_checkpoint_directory(const std::string& root);

// Holds `root` for one run: a second run on the same directory would overwrite this one's
// checkpoints and point its resume hint at the other's state. The lock (flock on root/.lock, so
// it dies with the process however it ends) is released when this is destroyed.
class CheckpointDirectoryLock {
 public:
  // Throws ConfigError on "checkpoint_dir" naming the process that holds it.
  explicit CheckpointDirectoryLock(const std::string& root);
  ~CheckpointDirectoryLock();
  CheckpointDirectoryLock(const CheckpointDirectoryLock&) = delete;
  CheckpointDirectoryLock& operator=(const CheckpointDirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

// Writes this rank's pieces into root/step-NNNNNN/rank-R.ckpt (atomically; creates folders).
void write_checkpoint_shard(const std::string& root, int step, int rank,
                            const std::vector<StatePiece>& pieces);
// Once every rank's shard is written: checks and lists them in the manifest, then points
// root/latest at this step. Returns the step's folder.
std::string write_checkpoint_manifest(const std::string& root, int step, const Config& config);

// The newest valid checkpoint under `path` (a checkpoint directory, or one step's folder).
// Newer folders that are not valid are skipped, and why goes to `skipped`. Throws ConfigError
// on the field "resume" when there is none.
CheckpointInfo find_checkpoint(const std::string& path,
                               std::vector<std::string>* skipped = nullptr);

// Whether `config` can continue `checkpoint` and train like the run that wrote it would have:
// same model, optimizer, seed, data and global batch; ConfigError naming the field otherwise.
// The world size, strategy and layout may differ (the state is re-sharded on load).
void check_resumable(const Config& config, const CheckpointInfo& checkpoint);

// Every shard read and assembled into the full state of `model`'s parameters.
TrainingState read_checkpoint(const CheckpointInfo& checkpoint, const ModelConfig& model,
                              uint64_t seed);
// The checkpoint in `folder` (a step's folder), checked and read once for all the rank threads
// of one process: the first to ask checks every shard against the manifest and assembles the
// state, the others wait for it and share it, and it is freed when the last lets go. (Every
// rank checking and assembling its own copy would read the shards world times and hold world
// copies of the model and its optimizer state at once.)
struct LoadedCheckpoint {
  CheckpointInfo info;
  TrainingState state;
};
std::shared_ptr<const LoadedCheckpoint> load_checkpoint_shared(const std::string& folder,
                                                               const ModelConfig& model,
                                                               uint64_t seed);

}  // namespace shardscope
