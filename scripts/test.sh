#!/usr/bin/env bash
# Builds everything (installing dependencies once) and runs the whole test suite under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd "${SHARDSCOPE_BUILD_DIR:-build}"
ctest --output-on-failure -j "${SHARDSCOPE_TEST_JOBS:-2}" "$@"
