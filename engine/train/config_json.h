#pragma once

#include <iosfwd>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace shardscope {

// A config file's JSON as every reader of one takes it (run --config, a worker's --config, the
// config.json collect reads): comments allowed, a key given twice in one object refused (parsers
// keep one silently: "world": 2, "world": 64 once ran 64 ranks), and nesting past 64 levels
// refused while parsing (an array nested 150,000 deep, a 300 KB file, once overflowed the stack;
// no config nests past 3). Throws ConfigError("config", ...) naming `name`.
nlohmann::json read_config_json(std::istream& in, const std::string& name);
// The nesting no file of a run goes past (collect reads the rank files with the same bound).
constexpr int kDeepestRunJson = 64;

}  // namespace shardscope
