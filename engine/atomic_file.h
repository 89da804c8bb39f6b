#pragma once

#include <cstddef>
#include <string>

namespace shardscope {

// Writes next to `path` and renames over it, so a reader never sees a half-written file.
void write_file_atomically(const std::string& path, const char* data, size_t size);
inline void write_file_atomically(const std::string& path, const std::string& text) {
  write_file_atomically(path, text.data(), text.size());
}

}  // namespace shardscope
