#pragma once

#include <filesystem>

namespace shardscope::test {

// A fresh directory for the running test case (named after it), created if missing.
std::filesystem::path test_temp_dir();

}  // namespace shardscope::test
