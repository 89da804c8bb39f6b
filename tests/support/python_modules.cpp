#include "tests/support/python_modules.h"

#include <cstdlib>
#include <map>
#include <mutex>

namespace shardscope::test {

bool python_has_packages(const std::string& packages) {
  static std::mutex guard;
  static std::map<std::string, bool> answers;
  std::lock_guard<std::mutex> lock(guard);
  if (auto it = answers.find(packages); it != answers.end()) return it->second;
  // find_spec of a top-level name reads the import path only; none of the packages runs.
  const std::string command =
      std::string(SHARDSCOPE_TEST_PYTHON) +
      " -c 'import importlib.util, sys; sys.exit(any(importlib.util.find_spec(p) is None for p "
      "in sys.argv[1:]))' " +
      packages + " > /dev/null 2>&1";
  return answers[packages] = std::system(command.c_str()) == 0;
}

}  // namespace shardscope::test
