#include "profiling/io/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace shardscope::profiling {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string size_text(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return std::to_string(bytes >> 30) + " GiB";
  return std::to_string(bytes >> 20) + " MiB";
}

}  // namespace

std::string input_file_problem(const std::string& path, uint64_t max_bytes,
                               const std::string& what) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    const int error = errno;
    if (error == ENOENT) return "no such file: " + path;
    if (error == ELOOP) return path + " is a symlink loop";
    return "cannot read " + path + ": " + std::strerror(error);
  }
  if (!S_ISREG(info.st_mode)) return path + " is " + kind_of(info.st_mode) + ", not a " + what;
  if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    return path + " is " + size_text(static_cast<uint64_t>(info.st_size)) + ", more than a " +
           what + " can be (" + size_text(max_bytes) + ")";
  }
  return "";
}

}  // namespace shardscope::profiling
