#pragma once

#include <sys/types.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace shardscope::shm {

// Reads of another rank process's memory by address (Linux cross-memory attach,
// process_vm_readv): the bytes move once, from the peer's tensor into this rank's, instead of
// twice through a shared slot. The kernel allows it between processes of one user unless a
// security module forbids it (Yama's ptrace_scope 1 and up, a seccomp filter): probe first.

// A read that failed: `error` is its errno (ESRCH: the process is gone, or a zombie).
class PeerReadError : public std::runtime_error {
 public:
  PeerReadError(const std::string& what, int error) : std::runtime_error(what), error(error) {}
  int error;
};

// Copies `bytes` at `remote` in process `pid` to `local`. Throws PeerReadError naming the process
// if the kernel refuses or the range is not mapped there.
void read_peer(pid_t pid, const void* remote, void* local, size_t bytes);

// Whether `pid`'s `bytes` at `remote` can be read and hold what `expected` holds.
bool can_read_peer(pid_t pid, const void* remote, const void* expected, size_t bytes);

}  // namespace shardscope::shm
