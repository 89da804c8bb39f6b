#include <gtest/gtest.h>

#include <ATen/Parallel.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
