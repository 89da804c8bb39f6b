#include "tests/support/temp_dir.h"

#include <gtest/gtest.h>

#include <string>

namespace shardscope::test {

std::filesystem::path test_temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  for (char& ch : name) {
    if (ch == '/') ch = '_';
  }
  auto dir = std::filesystem::temp_directory_path() /
             ("shardscope_test_" +
              std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" + name);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace shardscope::test
