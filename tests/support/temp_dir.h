#pragma once

#include <filesystem>

namespace shardscope::test {

// A fresh directory for the running test case (named after it), created if missing.
std::filesystem::path test_temp_dir();

// Removes a directory and everything under it.
void remove_tree(const std::filesystem::path& path);

// Installs the listener that deletes a test's directory when the test passes (kept, and named,
// when it fails; SHARDSCOPE_KEEP_TEST_FILES=1 keeps all). Called once by the test main.
void remove_temp_dirs_of_passed_tests();

}  // namespace shardscope::test
