#pragma once

#include <cstddef>
#include <cstdint>

namespace shardscope {

// SplitMix64 finaliser: turns structured integers (seed, step, index) into well-mixed bits.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ULL;

// FNV-1a over bytes, continuing from `hash`.
inline uint64_t fnv1a(const void* data, size_t size, uint64_t hash = kFnv1aOffset) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  return hash;
}

}  // namespace shardscope
