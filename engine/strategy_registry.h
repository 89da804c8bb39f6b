#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace shardscope {

class Strategy;
struct Config;

// What the engine knows of a strategy without building one: kept free of LibTorch so that
// configuration code can validate names cheaply.
struct StrategyInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Strategy>()> make;
  // Throws ConfigError for configurations this strategy cannot run (optional).
  std::function<void(const Config&)> validate;
};

class StrategyRegistry {
 public:
  static StrategyRegistry& instance();

  void add(StrategyInfo info);
  const StrategyInfo* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<StrategyInfo> entries_;
};

// Registers a strategy from a static initialiser in its own file.
struct StrategyRegistrar {
  explicit StrategyRegistrar(StrategyInfo info) {
    StrategyRegistry::instance().add(std::move(info));
  }
};

}  // namespace shardscope
