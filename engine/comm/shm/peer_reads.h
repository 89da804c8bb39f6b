#pragma once

#include <sys/types.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace shardscope::shm {

// Reads and writes of another rank process's memory by address (Linux cross-memory attach,
// process_vm_readv / process_vm_writev): the bytes move once, between the peer's tensor and this
// rank's, instead of twice through a shared slot. The kernel allows it between processes of one
// user unless a security module forbids it (Yama's ptrace_scope 1 and up, a seccomp filter):
// probe first. The kernel pins the peer's pages for each call: between 4 KiB pages that moves
// about a third of memcpy's speed on our 2-core VM, between huge pages nearly memcpy's. (Giving
// tensors huge pages made training steps slower, so they have none: docs/performance.md.)

// A read or write that failed: `error` is its errno (ESRCH: the process is gone, or a zombie).
class PeerReadError : public std::runtime_error {
 public:
  PeerReadError(const std::string& what, int error) : std::runtime_error(what), error(error) {}
  int error;
};

// Copies `bytes` at `remote` in process `pid` to `local`. Throws PeerReadError naming the process
// if the kernel refuses or the range is not mapped there.
void read_peer(pid_t pid, const void* remote, void* local, size_t bytes);
// Copies `bytes` at `local` to `remote` in process `pid`; throws as read_peer.
void write_peer(pid_t pid, const void* local, void* remote, size_t bytes);

// Whether `pid`'s `bytes` at `remote` can be read and hold what `expected` holds, and can be
// written (with those same bytes, so the peer sees no change).
bool can_read_and_write_peer(pid_t pid, void* remote, const void* expected, size_t bytes);

}  // namespace shardscope::shm
