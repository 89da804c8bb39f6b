#include "engine/comm/shm/shm_path.h"

#include <stdexcept>

namespace shardscope::shm {

Collectives::Path choose_path(const PathFacts& facts, const std::function<bool()>& probe) {
  const std::string& wanted = facts.forced;
  if (!wanted.empty() && wanted != "in-place" && wanted != "peer-reads" && wanted != "slots") {
    throw std::invalid_argument("SHARDSCOPE_SHM_PATH: '" + wanted +
                                "' is none of in-place, peer-reads, slots");
  }
  if (wanted == "slots") return Collectives::Path::kSlots;
  if (wanted == "in-place" && !facts.same_process) {
    throw std::invalid_argument(
        "SHARDSCOPE_SHM_PATH=in-place takes rank threads of one process; these are processes");
  }
  if (facts.same_process && wanted != "peer-reads") return Collectives::Path::kInPlace;
  if (wanted.empty() && facts.cores > 0 && facts.world > facts.cores)
    return Collectives::Path::kSlots;
  if (probe()) return Collectives::Path::kPeerReads;
  if (wanted == "peer-reads") {
    throw std::runtime_error(
        "SHARDSCOPE_SHM_PATH=peer-reads: the kernel refuses reads of peer processes' memory "
        "(process_vm_readv; Yama's ptrace_scope or a seccomp filter)");
  }
  return Collectives::Path::kSlots;
}

}  // namespace shardscope::shm
