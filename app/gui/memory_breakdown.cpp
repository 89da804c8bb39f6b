#include "app/gui/memory_breakdown.h"

#include <algorithm>

namespace shardscope::gui {

using profiling::MemoryKind;

int64_t MemoryBreakdown::total() const {
  int64_t sum = 0;
  for (int k = 0; k < static_cast<int>(MemoryKind::kAllocated); ++k) sum += bytes[k];
  return sum;
}

MemoryBreakdown peak_breakdown(const profiling::RankTrace& rank) {
  MemoryBreakdown now, peak;
  bool any_allocated = false, recorded_temporaries = false;
  for (const auto& c : rank.counters) {
    any_allocated |= c.kind == MemoryKind::kAllocated;
    recorded_temporaries |= c.kind == MemoryKind::kTemporaries;
  }
  // Samples carry the current value of one category each; the peak is the moment the total
  // held (allocation samples, or the categories' sum without them) is largest.
  auto held = [&](const MemoryBreakdown& b) {
    return any_allocated ? b.of(MemoryKind::kAllocated) : b.total();
  };
  int64_t best = -1;
  for (size_t i = 0; i < rank.counters.size(); ++i) {
    const auto& c = rank.counters[i];
    now.bytes[static_cast<int>(c.kind)] = c.bytes;
    now.t_ns = c.t_ns;
    // Samples at one instant are one moment: judge it after the last of them.
    if (i + 1 < rank.counters.size() && rank.counters[i + 1].t_ns == c.t_ns) continue;
    if (held(now) > best) {
      best = held(now);
      peak = now;
    }
  }
  if (any_allocated && !recorded_temporaries) {
    const int64_t named = peak.total() - peak.of(MemoryKind::kTemporaries);
    peak.bytes[static_cast<int>(MemoryKind::kTemporaries)] =
        std::max<int64_t>(0, peak.of(MemoryKind::kAllocated) - named);
  }
  return peak;
}

std::string peak_moment(const profiling::Trace& trace, const profiling::RankTrace& rank,
                        int64_t t_ns) {
  const profiling::Event* inner = nullptr;
  int step = -1;
  for (const auto& e : rank.events) {
    if (e.lane != profiling::kHostLane || e.t0_ns > t_ns || e.t1_ns <= t_ns) continue;
    if (e.step >= 0) step = e.step;
    if (inner == nullptr || e.t0_ns >= inner->t0_ns) inner = &e;
  }
  if (inner == nullptr) return "between steps";
  const std::string where = trace.str(inner->name);
  return step >= 0 ? "step " + std::to_string(step) + ", " + where : where;
}

}  // namespace shardscope::gui
