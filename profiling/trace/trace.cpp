#include "profiling/trace/trace.h"

#include <algorithm>
#include <tuple>

namespace shardscope::profiling {
namespace {

constexpr const char* kCategoryNames[kCategoryCount] = {
    "step",       "micro_batch", "forward", "backward", "grad_sync", "optimizer",
    "collective", "wait",        "kernel",  "memcpy",   "other"};

constexpr const char* kMemoryKindNames[kMemoryKindCount] = {
    "parameters",   "gradients",   "optimizer_state", "activations",
    "comm_buffers", "temporaries", "allocated"};

}  // namespace

const char* category_name(Category category) {
  const int i = static_cast<int>(category);
  return i >= 0 && i < kCategoryCount ? kCategoryNames[i] : "invalid";
}

bool parse_category(const std::string& name, Category* out) {
  for (int i = 0; i < kCategoryCount; ++i) {
    if (name == kCategoryNames[i]) {
      *out = static_cast<Category>(i);
      return true;
    }
  }
  return false;
}

bool is_compute(Category category) {
  return category == Category::kForward || category == Category::kBackward ||
         category == Category::kKernel;
}

bool is_communication(Category category) {
  return category == Category::kCollective;
}

const char* memory_kind_name(MemoryKind kind) {
  const int i = static_cast<int>(kind);
  return i >= 0 && i < kMemoryKindCount ? kMemoryKindNames[i] : "invalid";
}

uint32_t Trace::intern(const std::string& s) {
  if (index_.empty()) {
    for (uint32_t i = 0; i < strings.size(); ++i) index_.emplace(strings[i], i);
  }
  auto [it, inserted] = index_.emplace(s, static_cast<uint32_t>(strings.size()));
  if (inserted) strings.push_back(s);
  return it->second;
}

size_t Trace::event_count() const {
  size_t n = 0;
  for (const auto& r : ranks) n += r.events.size();
  return n;
}

void Trace::normalise() {
  for (auto& r : ranks) {
    std::stable_sort(r.events.begin(), r.events.end(), [](const Event& a, const Event& b) {
      return std::tie(a.lane, a.t0_ns) < std::tie(b.lane, b.t0_ns);
    });
    std::stable_sort(
        r.counters.begin(), r.counters.end(),
        [](const CounterSample& a, const CounterSample& b) { return a.t_ns < b.t_ns; });
  }
}

}  // namespace shardscope::profiling
