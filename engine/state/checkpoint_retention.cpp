#include "engine/state/checkpoint_retention.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/state/checkpoint.h"
#include "engine/train/config.h"

namespace shardscope {
namespace {

// Written into a step folder by the run that created it: retention's permission to remove it.
constexpr const char* kMarker = ".shardscope-checkpoint";

// The files a checkpoint writer leaves in its folder: shards, the manifest, their temporaries
// (write_file_atomically's ".partial") and the marker. Nothing else is ever removed.
bool written_by_checkpoint(const std::string& name) {
  std::string base = name;
  const std::string partial = ".partial";
  if (base.size() > partial.size() &&
      base.compare(base.size() - partial.size(), partial.size(), partial) == 0)
    base.resize(base.size() - partial.size());
  if (base == kMarker || base == "manifest.json") return true;
  const std::string prefix = "rank-", suffix = ".ckpt";
  if (base.size() <= prefix.size() + suffix.size() || base.rfind(prefix, 0) != 0 ||
      base.compare(base.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const std::string digits =
      base.substr(prefix.size(), base.size() - prefix.size() - suffix.size());
  return digits.find_first_not_of("0123456789") == std::string::npos;
}

// A step folder of ours, opened without following a symlink at any point: the name must be a
// real directory under root, and its marker a regular file. -1 when it is not ours.
int open_our_step_folder(int root_fd, const std::string& name) {
  const int fd = openat(root_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat marker {};
  if (fstatat(fd, kMarker, &marker, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(marker.st_mode)) {
    close(fd);
    return -1;
  }
  return fd;
}

bool complete(int folder_fd) {
  struct stat manifest {};
  return fstatat(folder_fd, "manifest.json", &manifest, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISREG(manifest.st_mode);
}

// Removes the checkpoint's own files (regular files only, by name), then the folder if that left
// it empty. Best effort: a folder that will not go is only disk space.
void remove_our_step_folder(int root_fd, int folder_fd, const std::string& name) {
  const int list_fd = dup(folder_fd);
  DIR* dir = list_fd >= 0 ? fdopendir(list_fd) : nullptr;
  if (dir == nullptr) {
    if (list_fd >= 0) close(list_fd);
    return;
  }
  std::vector<std::string> ours;
  while (const dirent* entry = readdir(dir)) {
    const std::string file = entry->d_name;
    struct stat info {};
    if (written_by_checkpoint(file) &&
        fstatat(folder_fd, file.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(info.st_mode))
      ours.push_back(file);
  }
  closedir(dir);
  // The marker goes last: a folder interrupted here is still recognised as ours next time.
  std::sort(ours.begin(), ours.end(), [](const std::string& a, const std::string& b) {
    return (a == kMarker) < (b == kMarker);
  });
  for (const std::string& file : ours) unlinkat(folder_fd, file.c_str(), 0);
  unlinkat(root_fd, name.c_str(), AT_REMOVEDIR);  // fails, harmlessly, when anything is left
}

}  // namespace

std::optional<int> checkpoint_folder_step(const std::string& name) {
  if (name.size() < 11 || name.size() > 14 || name.rfind("step-", 0) != 0) return std::nullopt;
  if (name.find_first_not_of("0123456789", 5) != std::string::npos) return std::nullopt;
  const int step = std::stoi(name.substr(5));
  // Exactly the name checkpoint_step_directory gives that step: no other spelling of it.
  if (checkpoint_step_directory("", step).substr(1) != name) return std::nullopt;
  return step;
}

void make_checkpoint_step_folder(const std::string& folder) {
  if (mkdir(folder.c_str(), 0755) == 0) {
    const std::string marker = folder + "/" + kMarker;
    const int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno != EEXIST)
      throw std::runtime_error("cannot write " + marker + ": " + std::strerror(errno));
    if (fd >= 0) {
      const char text[] = "made by shardscope: its checkpoint retention may remove this folder\n";
      const ssize_t written = write(fd, text, sizeof text - 1);
      close(fd);
      if (written != static_cast<ssize_t>(sizeof text - 1))
        throw std::runtime_error("cannot write " + marker);
    }
    return;
  }
  if (errno != EEXIST)
    throw std::runtime_error("cannot create " + folder + ": " + std::strerror(errno));
  struct stat info {};
  if (lstat(folder.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    throw std::runtime_error("checkpoint: " + folder +
                             " exists and is not a folder (a symlink or a file); move it away");
  }
}

void check_step_folders_writable(const std::string& root) {
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) return;
  std::string refused;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (!checkpoint_folder_step(name)) continue;
    struct stat info {};
    if (lstat((root + "/" + name).c_str(), &info) == 0 && !S_ISDIR(info.st_mode)) {
      refused = root + "/" + name;
      break;
    }
  }
  closedir(dir);
  if (!refused.empty()) {
    throw ConfigError("checkpoint_dir", refused +
                                            " is a symlink or a file under a checkpoint's name: "
                                            "checkpoints are never written or removed through "
                                            "one; move it away or choose another --checkpoint-dir");
  }
}

void apply_checkpoint_retention(const std::string& root, int step, int keep) {
  if (keep <= 0) return;
  const int root_fd = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) return;
  std::vector<std::pair<int, std::string>> steps;  // ours by name, newest first
  if (DIR* dir = fdopendir(dup(root_fd))) {
    while (const dirent* entry = readdir(dir)) {
      if (const auto saved = checkpoint_folder_step(entry->d_name))
        steps.emplace_back(*saved, entry->d_name);
    }
    closedir(dir);
  }
  std::sort(steps.rbegin(), steps.rend());
  int kept = 0;
  for (const auto& [saved, name] : steps) {
    if (saved > step) continue;  // another run's, newer than this one
    const int folder_fd = open_our_step_folder(root_fd, name);
    if (folder_fd < 0) continue;  // not ours: the user's, or a symlink
    if (complete(folder_fd) && ++kept <= keep) {
      close(folder_fd);
      continue;
    }
    // Older than the newest `keep` complete ones (this step's is complete and counted first).
    if (kept > 0) remove_our_step_folder(root_fd, folder_fd, name);
    close(folder_fd);
  }
  close(root_fd);
}

}  // namespace shardscope
