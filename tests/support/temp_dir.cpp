#include "tests/support/temp_dir.h"

#include <ftw.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>

namespace shardscope::test {

namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;
}

std::filesystem::path temp_dir_of(const ::testing::TestInfo& info) {
  std::string name = std::string(info.test_suite_name()) + "." + info.name();
  for (char& ch : name) {
    if (ch == '/') ch = '_';
  }
  return std::filesystem::temp_directory_path() /
         ("shardscope_test_" + std::to_string(getpid()) + "_" +
          std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" + name);
}

// A passing test's files are of no further use (SHARDSCOPE_KEEP_TEST_FILES=1 keeps them, to look
// at the GUI tests' screenshots, say); a failing test's are what one looks at next.
class RemoveTempDirsOfPassedTests : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const auto dir = temp_dir_of(info);
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) return;
    if (info.result() != nullptr && info.result()->Failed()) {
      std::printf("[ KEPT     ] %s\n", dir.c_str());
      return;
    }
    if (std::getenv("SHARDSCOPE_KEEP_TEST_FILES") == nullptr) remove_tree(dir);
  }
};

}  // namespace

std::filesystem::path test_temp_dir() {
  auto dir = temp_dir_of(*::testing::UnitTest::GetInstance()->current_test_info());
  std::filesystem::create_directories(dir);
  return dir;
}

// Not std::filesystem::remove_all: LibTorch exports a broken copy of it that the dynamic linker
// binds our calls to (a jump to address 0).
void remove_tree(const std::filesystem::path& path) {
  nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void remove_temp_dirs_of_passed_tests() {
  ::testing::UnitTest::GetInstance()->listeners().Append(new RemoveTempDirsOfPassedTests);
}

}  // namespace shardscope::test
