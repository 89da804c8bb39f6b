#pragma once

#include <cstddef>

namespace shardscope {

// The shm backend's slot and ring sizes from SHARDSCOPE_SHM_SLOT_BYTES and _RING_BYTES (tests
// shrink them to exercise the backend's rounds), `fallback` where unset; at most 1 GiB each, one
// rank's share of memory it maps, and a slot at least 64 bytes a rank and two more.
size_t shm_slot_bytes(size_t fallback, int world);
size_t shm_ring_bytes(size_t fallback);

// Checks every environment variable that changes how ranks of `world` start and talk, before the
// first of them starts: a bad one is the user's input (exit 2, naming it), not a rank that failed
// (a bad SHARDSCOPE_SHM_SLOT_BYTES segfaulted, a 9000-character SHARDSCOPE_RUN_ID printed the
// store's stack dump, SHARDSCOPE_WORKER=/nonexistent ended as "status 127"). Throws ConfigError.
void check_launch_environment(int world);

}  // namespace shardscope
