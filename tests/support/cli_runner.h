#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "app/cli/cli_main.h"

namespace shardscope::test {

// The command line run in this process, as a user would type it: its exit code and what it
// printed on each stream. (For app_tests, which link the command line.)
struct CliResult {
  int code;
  std::string out, err;
};

inline CliResult cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = cli::cli_main(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace shardscope::test
