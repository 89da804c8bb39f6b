#include <iostream>
#include <string>
#include <vector>

#include "app/cli/cli_main.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return shardscope::cli::cli_main(args, std::cout, std::cerr);
}
