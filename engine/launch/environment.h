#pragma once

#include <cstddef>

namespace shardscope {

// A byte count from the environment variable `name`, between `least` and `most` (tests shrink the
// shm backend's rounds with them); `fallback` when it is unset or empty. Digits only: strtoull
// took "-1" for 2^64 - 1, and a slot that large crashed the first collective. Throws ConfigError
// naming the variable.
size_t bytes_from_env(const char* name, size_t fallback, size_t least, size_t most);

// The most a shm slot or ring may hold: each is one rank's share of memory it maps.
inline constexpr size_t kMostShmBytes = size_t{1} << 30;

// Checks every environment variable that changes how ranks of `world` start and talk, before the
// first of them starts: a bad one is the user's input (exit 2, naming it), not a rank that failed
// (a bad SHARDSCOPE_SHM_SLOT_BYTES segfaulted, a 9000-character SHARDSCOPE_RUN_ID printed the
// store's stack dump, SHARDSCOPE_WORKER=/nonexistent ended as "status 127"). Throws ConfigError.
void check_launch_environment(int world);

}  // namespace shardscope
