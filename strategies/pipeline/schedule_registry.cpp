#include "strategies/pipeline/schedule_registry.h"

#include <algorithm>
#include <stdexcept>

namespace shardscope::pipeline {

ScheduleRegistry& ScheduleRegistry::instance() {
  static ScheduleRegistry registry;
  return registry;
}

void ScheduleRegistry::add(ScheduleInfo info) {
  const std::string& name = info.name;
  if (name.empty()) throw std::logic_error("pipeline schedule registered without a name");
  if (find(name) != nullptr) throw std::logic_error("pipeline schedule registered twice: " + name);
  if (!info.orders || !info.bubble_formula || info.bubble_formula_text.empty()) {
    throw std::logic_error("pipeline schedule " + name +
                           " registered without its orders or bubble");
  }
  const int v = info.default_stages_per_rank;
  const int most = info.max_stages_per_rank;
  if (info.min_stages_per_rank < 1 || v < info.min_stages_per_rank || (most > 0 && v > most)) {
    throw std::logic_error("pipeline schedule " + name +
                           " runs by default a number of stages per rank it refuses");
  }
  if (info.placement == StagePlacement::kV && (info.min_stages_per_rank != 2 || most != 2)) {
    throw std::logic_error("pipeline schedule " + name +
                           " folds into a V of other than two stages");
  }
  names_.push_back(name);
  entries_.push_back(std::move(info));
}

const ScheduleInfo* ScheduleRegistry::find(const std::string& name) const {
  const auto it = std::find_if(entries_.begin(), entries_.end(),
                               [&](const ScheduleInfo& info) { return info.name == name; });
  return it == entries_.end() ? nullptr : &*it;
}

}  // namespace shardscope::pipeline
