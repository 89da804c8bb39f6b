#include "engine/state/atomic_file.h"

#include <dirent.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

namespace shardscope {

void write_file_atomically(const std::string& path, const char* data, size_t size) {
  const std::string tmp = path + ".partial";
  auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error(what + " " + tmp + ": " + reason);
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      fail("failed writing");
    }
    done += static_cast<size_t>(n);
  }
  // On disk before it gets its name: after a crash the name holds the whole file or nothing new.
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("failed syncing");
  }
  if (::close(fd) != 0) fail("failed closing");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename to " + path + ":");
}

void remove_directory_of_files(const std::string& path) {
  if (DIR* dir = opendir(path.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") unlink((path + "/" + name).c_str());
    }
    closedir(dir);
  }
  rmdir(path.c_str());
}

}  // namespace shardscope
