#include "engine/comm/shm/peer_reads.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardscope::shm {

namespace {

// One direction of a copy between this process and `pid`, retried where it stopped short.
void move_bytes(pid_t pid, char* local, char* remote, size_t bytes, bool write) {
  while (bytes > 0) {
    iovec mine{local, bytes};
    iovec theirs{remote, bytes};
    const ssize_t moved = write ? process_vm_writev(pid, &mine, 1, &theirs, 1, 0)
                                : process_vm_readv(pid, &mine, 1, &theirs, 1, 0);
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0) {
      const int error = moved < 0 ? errno : EFAULT;
      throw PeerReadError(std::string("shm: cannot ") + (write ? "write" : "read") +
                              " rank process " + std::to_string(pid) +
                              "'s tensor: " + std::strerror(error),
                          error);
    }
    // A copy stops short only at the edge of a mapping; the next call goes on from there.
    local += moved;
    remote += moved;
    bytes -= static_cast<size_t>(moved);
  }
}

}  // namespace

void read_peer(pid_t pid, const void* remote, void* local, size_t bytes) {
  move_bytes(pid, static_cast<char*>(local), static_cast<char*>(const_cast<void*>(remote)), bytes,
             false);
}

void write_peer(pid_t pid, const void* local, void* remote, size_t bytes) {
  move_bytes(pid, static_cast<char*>(const_cast<void*>(local)), static_cast<char*>(remote), bytes,
             true);
}

bool can_read_and_write_peer(pid_t pid, void* remote, const void* expected, size_t bytes) {
  std::vector<char> got(bytes);
  try {
    read_peer(pid, remote, got.data(), bytes);
    if (std::memcmp(got.data(), expected, bytes) != 0) return false;
    write_peer(pid, got.data(), remote, bytes);
  } catch (const PeerReadError&) {
    return false;
  }
  return true;
}

}  // namespace shardscope::shm
