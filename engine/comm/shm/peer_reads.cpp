#include "engine/comm/shm/peer_reads.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardscope::shm {

void read_peer(pid_t pid, const void* remote, void* local, size_t bytes) {
  auto* to = static_cast<char*>(local);
  auto* from = static_cast<const char*>(remote);
  while (bytes > 0) {
    iovec mine{to, bytes};
    iovec theirs{const_cast<char*>(from), bytes};
    const ssize_t got = process_vm_readv(pid, &mine, 1, &theirs, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int error = got < 0 ? errno : EFAULT;
      throw PeerReadError("shm: cannot read rank process " + std::to_string(pid) +
                              "'s tensor: " + std::strerror(error),
                          error);
    }
    // A read stops short only at the edge of a mapping; the next call goes on from there.
    to += got;
    from += got;
    bytes -= static_cast<size_t>(got);
  }
}

bool can_read_peer(pid_t pid, const void* remote, const void* expected, size_t bytes) {
  std::vector<char> got(bytes);
  try {
    read_peer(pid, remote, got.data(), bytes);
  } catch (const PeerReadError&) {
    return false;
  }
  return std::memcmp(got.data(), expected, bytes) == 0;
}

}  // namespace shardscope::shm
