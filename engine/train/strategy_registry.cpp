#include "engine/train/strategy_registry.h"

#include <algorithm>
#include <stdexcept>

#include "engine/train/config.h"

namespace shardscope {

const char* family_name(StrategyFamily family) {
  switch (family) {
    case StrategyFamily::kReference:
      return "reference";
    case StrategyFamily::kDataParallel:
      return "data parallel";
    case StrategyFamily::kModelParallel:
      return "model parallel";
    case StrategyFamily::kContextParallel:
      return "context parallel";
    case StrategyFamily::kExpertParallel:
      return "expert parallel";
  }
  return "?";
}

StrategyRegistry& StrategyRegistry::instance() {
  static StrategyRegistry registry;
  return registry;
}

void StrategyRegistry::add(StrategyInfo info) {
  if (find(info.name) != nullptr) {
    throw std::logic_error("strategy registered twice: " + info.name);
  }
  entries_.push_back(std::move(info));
}

const StrategyInfo* StrategyRegistry::find(const std::string& name) const {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const StrategyInfo& info) { return info.name == name; });
  return it == entries_.end() ? nullptr : &*it;
}

StrategyTraits strategy_traits(const std::string& name) {
  const StrategyInfo* info = StrategyRegistry::instance().find(name);
  if (info == nullptr) return StrategyTraits{};
  StrategyTraits traits = info->traits;
  if (!traits.options_base.empty()) {
    const StrategyTraits base = strategy_traits(traits.options_base);
    traits.options = base.options.joined(traits.options);
    const GradientSync::AfterStep after_step = traits.gradient_sync.after_step;
    traits.gradient_sync = base.gradient_sync;
    traits.gradient_sync.after_step = after_step;
  }
  return traits;
}

std::vector<int> work_classes(const Config& config) {
  const StrategyTraits traits = strategy_traits(config.strategy);
  std::vector<int> classes(std::max(0, config.world));
  for (int r = 0; r < config.world; ++r) {
    if (traits.work_class) {
      classes[r] = traits.work_class(config, r);
    } else {
      // A mixture's routers send each rank's tokens to its experts unevenly: real differences.
      const bool alike = (traits.family == StrategyFamily::kDataParallel ||
                          traits.family == StrategyFamily::kReference) &&
                         config.model.experts == 0;
      classes[r] = alike ? 0 : r;
    }
  }
  return classes;
}

std::vector<std::string> StrategyRegistry::names() const {
  return names_where([](const StrategyTraits&) { return true; });
}

std::vector<std::string> StrategyRegistry::names_where(
    const std::function<bool(const StrategyTraits&)>& keep) const {
  std::vector<std::string> names;
  for (const auto& entry : entries_) {
    if (keep(entry.traits)) names.push_back(entry.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string StrategyRegistry::reference() const {
  const auto found =
      names_where([](const StrategyTraits& t) { return t.family == StrategyFamily::kReference; });
  if (found.size() != 1) throw std::logic_error("exactly one reference strategy must register");
  return found.front();
}

}  // namespace shardscope
