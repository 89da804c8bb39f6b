#pragma once

#include <string>

namespace shardscope::test {

// Whether the Python the tests were configured with (SHARDSCOPE_TEST_PYTHON) can find every
// top-level package named in `packages` ("torch safetensors"), without importing them: importing
// torch takes seconds, and a test that skips without it imports it anyway in its own script.
// Each answer is kept for the process's other cases.
bool python_has_packages(const std::string& packages);

}  // namespace shardscope::test
