#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  shardscope::test::remove_temp_dirs_of_passed_tests();
  return RUN_ALL_TESTS();
}
