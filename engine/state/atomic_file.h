#pragma once

#include <cstddef>
#include <string>

namespace shardscope {

// Writes next to `path` and renames over it, so a reader never sees a half-written file.
void write_file_atomically(const std::string& path, const char* data, size_t size);
inline void write_file_atomically(const std::string& path, const std::string& text) {
  write_file_atomically(path, text.data(), text.size());
}

// Claims `path` as an output of this process while it lives: its temporary PATH.partial (what
// write_file_atomically writes first) is opened and locked, so a second process that claims the
// same path meanwhile is refused, naming the first's pid, rather than writing over its output.
// Released when destroyed; the temporary is removed then if it was never written and renamed.
class OutputClaim {
 public:
  // Throws std::runtime_error when another process holds the claim.
  explicit OutputClaim(const std::string& path);
  ~OutputClaim();
  OutputClaim(OutputClaim&& other) noexcept;
  OutputClaim(const OutputClaim&) = delete;
  OutputClaim& operator=(const OutputClaim&) = delete;
  OutputClaim& operator=(OutputClaim&&) = delete;

 private:
  std::string tmp_;
  int fd_ = -1;
};

// Removes a folder that holds only plain files (a run directory, a checkpoint's step folder),
// best effort. (Not std::filesystem::remove_all: LibTorch exports its own build of it, which
// the dynamic linker may pick, and it crashes when called from here.)
void remove_directory_of_files(const std::string& path);

}  // namespace shardscope
