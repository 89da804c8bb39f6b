#include "engine/state/atomic_file.h"

#include <dirent.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
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

OutputClaim::OutputClaim(const std::string& path) : tmp_(path + ".partial") {
  fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open " + tmp_ + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string pid = n > 0 ? std::string(holder, size_t(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    throw std::runtime_error(path + " is being written by another run" +
                             (pid.empty() ? "" : " (pid " + pid + ")") +
                             ": give each run its own output");
  }
  // Ours now: a leftover of an interrupted write is replaced, and a second run reads our pid.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // Only the message to a second run lacks the pid; the claim itself holds.
  }
}

OutputClaim::OutputClaim(OutputClaim&& other) noexcept
    : tmp_(std::move(other.tmp_)), fd_(other.fd_) {
  other.fd_ = -1;
}

OutputClaim::~OutputClaim() {
  if (fd_ < 0) return;
  // Still at its temporary name (never written and renamed over the output): ours to remove.
  struct stat held {
  }, named{};
  if (::fstat(fd_, &held) == 0 && ::stat(tmp_.c_str(), &named) == 0 &&
      held.st_dev == named.st_dev && held.st_ino == named.st_ino)
    ::unlink(tmp_.c_str());
  ::close(fd_);
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
