#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "app/cli/exit_code.h"

namespace shardscope::cli {

// The whole command line interface; `args` excludes the program name. Used by main() and tests.
int cli_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace shardscope::cli
