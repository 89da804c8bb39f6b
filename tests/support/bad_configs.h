#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace shardscope::test {

// An invalid configuration as a config-file JSON object, the field it must be blamed on, and a
// piece of the message. The CLI test turns the same rows into flags.
struct BadConfigCase {
  std::string json;
  std::string field;
  std::string message;
};

std::vector<BadConfigCase> bad_config_cases();
inline void PrintTo(const BadConfigCase& c, std::ostream* os) {
  *os << c.json;
}
std::string bad_config_name(const BadConfigCase& c);

}  // namespace shardscope::test
