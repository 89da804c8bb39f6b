#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardscope::profiling {

// The live blocks of one rank, by address: an open-addressing table (linear probing, deletion
// by backward shift), because a traced rank inserts and erases one entry per allocation, and a
// node-based map pays a heap allocation and a free for each of them. Values are small and
// copied; pointers into the table are valid until the next insert or erase.
template <typename Value>
class BlockMap {
 public:
  BlockMap() : slots_(kInitialSlots) {}

  Value* find(const void* key) {
    for (size_t i = home(key);; i = next(i)) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

  // Inserts `value` at `key`, replacing what was there.
  void assign(const void* key, const Value& value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = home(key);
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = next(i);
    if (slots_[i].key == kEmpty) ++size_;
    slots_[i].key = key;
    slots_[i].value = value;
  }

  // Removes the entry `found` (a pointer find returned).
  void erase(Value* found) {
    // The slot holding `found`, counted in bytes: `found` points into a slot, not at one.
    const char* base = reinterpret_cast<const char*>(&slots_[0].value);
    size_t hole = static_cast<size_t>(reinterpret_cast<const char*>(found) - base) / sizeof(Slot);
    // Later entries of the same probe run move back into the hole, unless the hole lies before
    // where their probe starts (cyclically), so that every entry stays reachable from its home.
    for (size_t i = next(hole); slots_[i].key != kEmpty; i = next(i)) {
      const size_t h = home(slots_[i].key);
      const bool stays = hole <= i ? (hole < h && h <= i) : (hole < h || h <= i);
      if (stays) continue;
      slots_[hole] = slots_[i];
      hole = i;
    }
    slots_[hole].key = kEmpty;
    --size_;
  }

  size_t size() const { return size_; }

 private:
  // No block lives at the last address of the address space, so it marks an empty slot (null
  // cannot: a zero-byte allocation may report it).
  static inline const void* const kEmpty = reinterpret_cast<const void*>(~uintptr_t{0});
  static constexpr size_t kInitialSlots = 1024;

  struct Slot {
    const void* key = kEmpty;
    Value value{};
  };

  // Fibonacci hashing of the address without its alignment bits.
  size_t home(const void* key) const {
    const uint64_t x = (reinterpret_cast<uintptr_t>(key) >> 4) * 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(x >> 32) & (slots_.size() - 1);
  }
  size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }

  void grow() {
    std::vector<Slot> old(2 * slots_.size());
    old.swap(slots_);
    size_ = 0;
    for (const Slot& slot : old) {
      if (slot.key != kEmpty) assign(slot.key, slot.value);
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace shardscope::profiling
