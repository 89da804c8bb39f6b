#pragma once

#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace shardscope {

// Which rank a broken connection was. Gloo names a peer that vanished by its socket address
// ("Connection reset by peer [127.0.0.1]:30087"), a port nobody can map to a rank. Each rank
// process says on the job's store which host and process it is; a rank whose connection breaks
// then names the peers on its host that are gone.
void publish_rank_process(c10d::Store& store, int rank);

// "; rank 1 (pid 4242) has exited" for every other rank on this host whose process is gone (or a
// zombie), or "" when none is, or when `message` is not about a broken connection.
std::string gone_peers_note(c10d::Store& store, int world, int self, const std::string& message);

}  // namespace shardscope
