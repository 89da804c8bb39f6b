#!/usr/bin/env bash
# Builds and runs test binaries under a sanitizer (CMakePresets.json):
#   scripts/sanitize.sh asan [CTEST_REGEX]   AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/sanitize.sh tsan [CTEST_REGEX]   ThreadSanitizer (suppressions: scripts/tsan.supp)
# TARGETS picks the test binaries to build (default: all of them; a full sanitized build takes
# a long time on 2 cores, so e.g. TARGETS="profiling_tests gui_tests" for a quick check).
# LibTorch, Gloo and libgomp come uninstrumented from the wheel: ASan and UBSan check our code
# and what it hands them; leak detection is off because LibTorch keeps process-lifetime
# allocations on purpose.
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET="${1:?usage: scripts/sanitize.sh asan|tsan [ctest regex]}"
REGEX="${2:-}"
case "$PRESET" in asan|tsan) ;; *) echo "unknown preset '$PRESET' (asan, tsan)" >&2; exit 2;; esac
bash scripts/install-deps.sh >/dev/null
[ -f "build-$PRESET/build.ninja" ] || cmake --preset "$PRESET" -Wno-dev >/dev/null
TARGETS="${TARGETS:-engine_tests profiling_tests strategies_tests app_tests gui_tests shardscope}"
# shellcheck disable=SC2086
cmake --build --preset "$PRESET" -- $TARGETS
# Binaries left out of TARGETS stand in ctest as *_NOT_BUILT placeholders: skip them, and the
# CLI smoke tests when the binary itself was not built.
EXCLUDE="_NOT_BUILT"
case " $TARGETS " in *" shardscope "*) ;; *) EXCLUDE="$EXCLUDE|^shardscope_";; esac
ctest --preset "$PRESET" -j "${SHARDSCOPE_TEST_JOBS:-2}" -E "$EXCLUDE" ${REGEX:+-R "$REGEX"}
