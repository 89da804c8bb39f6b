#include "engine/train/config_json.h"

#include <istream>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/train/config.h"

namespace shardscope {

nlohmann::json read_config_json(std::istream& in, const std::string& name) {
  constexpr int kDeepest = kDeepestRunJson;
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> keys_in;  // one set of keys per object being read
  std::string duplicate;
  const auto check = [&](int depth, Event event, nlohmann::json& parsed) {
    if (depth > kDeepest) {
      throw ConfigError("config", "'" + name + "' nests deeper than " + std::to_string(kDeepest) +
                                      " levels; no config does");
    }
    if (event == Event::object_start) keys_in.emplace_back();
    if (event == Event::object_end && !keys_in.empty()) keys_in.pop_back();
    if (event == Event::key && !keys_in.empty() && duplicate.empty() &&
        !keys_in.back().insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in, check, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number no double holds (1e400).
    throw ConfigError("config", "'" + name + "' is not valid JSON: " + e.what());
  }
  if (!duplicate.empty()) {
    throw ConfigError("config",
                      "'" + name + "' gives the key '" +
                          (duplicate.size() > 80 ? duplicate.substr(0, 60) + "..." : duplicate) +
                          "' twice in one object; give each key once");
  }
  return json;
}

}  // namespace shardscope
