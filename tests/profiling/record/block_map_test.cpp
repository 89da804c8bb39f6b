// The tracker's table of live blocks against std::unordered_map, through random inserts,
// replacements and erasures that collide, wrap around the table and make it grow.
#include "profiling/record/block_map.h"

#include <random>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

namespace shardscope::profiling {
namespace {

struct Value {
  int64_t bytes = 0;
  int kind = 0;
  int64_t epoch = 0;  // 24 bytes: a slot size that is no power of two
};

TEST(BlockMap, AgreesWithAnUnorderedMapThroughRandomInsertsAndErasures) {
  BlockMap<Value> map;
  std::unordered_map<const void*, int64_t> expected;
  std::mt19937_64 rng(7);
  // Addresses from a small range, 16-byte aligned, so that probe runs collide and wrap.
  auto address = [&] {
    return reinterpret_cast<const void*>(uintptr_t{4096} + 16 * (rng() % 5000));
  };
  for (int i = 0; i < 200000; ++i) {
    const void* key = address();
    if (rng() % 3 != 0) {
      const int64_t bytes = static_cast<int64_t>(rng() % 1000);
      map.assign(key, Value{bytes, 1, 2});
      expected[key] = bytes;
    } else if (Value* found = map.find(key)) {
      ASSERT_TRUE(expected.count(key));
      EXPECT_EQ(found->bytes, expected[key]);
      map.erase(found);
      expected.erase(key);
    } else {
      ASSERT_FALSE(expected.count(key));
    }
    ASSERT_EQ(map.size(), expected.size());
  }
  for (const auto& [key, bytes] : expected) {
    const Value* found = map.find(key);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->bytes, bytes);
  }
}

}  // namespace
}  // namespace shardscope::profiling
