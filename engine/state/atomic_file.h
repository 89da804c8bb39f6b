#pragma once

#include <cstddef>
#include <string>

namespace shardscope {

// Writes next to `path` and renames over it, so a reader never sees a half-written file.
void write_file_atomically(const std::string& path, const char* data, size_t size);
inline void write_file_atomically(const std::string& path, const std::string& text) {
  write_file_atomically(path, text.data(), text.size());
}

// Removes a folder that holds only plain files (a run directory, a checkpoint's step folder),
// best effort. (Not std::filesystem::remove_all: LibTorch exports its own build of it, which
// the dynamic linker may pick, and it crashes when called from here.)
void remove_directory_of_files(const std::string& path);

}  // namespace shardscope
