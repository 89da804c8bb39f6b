#pragma once

#include <optional>
#include <string>

namespace shardscope {

// What a checkpoint directory's retention may touch. A checkpoint directory is the user's: it can
// hold their own folders and files, folders named like ours, and symlinks. Retention removes only
// step folders this program created (a marker file inside, written when it made the folder), never
// through a symlink, and in them only the files it writes; a folder that still holds anything else
// stays. Older checkpoints without the marker are never removed.

// The step of a folder named exactly as checkpoint_step_directory names them (step-NNNNNN); none
// for anything else (step-1, step-000001x).
std::optional<int> checkpoint_folder_step(const std::string& name);

// Creates root/step-NNNNNN for writing a shard, marked as ours when this call made it. Where the
// name exists already it must be a real folder (a symlink or a file there is refused:
// std::runtime_error naming it).
void make_checkpoint_step_folder(const std::string& folder);

// Refuses (ConfigError on "checkpoint_dir") a checkpoint directory holding a symlink or a file
// under a step folder's name, before training starts: a run would write its shards through it.
void check_step_folders_writable(const std::string& root);

// After the checkpoint of `step` is complete: keeps the `keep` newest complete checkpoints of
// ours up to `step` and removes our older step folders (complete or interrupted). Folders newer
// than `step` belong to another run and stay. `keep` 0 keeps everything.
void apply_checkpoint_retention(const std::string& root, int step, int keep);

}  // namespace shardscope
