#!/usr/bin/env bash
# Installs dependencies (once), configures (once) and builds shardscope into build/.
# Idempotent: a second run with nothing changed finishes in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR="${SHARDSCOPE_BUILD_DIR:-build}"
BUILD_TYPE="${SHARDSCOPE_BUILD_TYPE:-Release}"
JOBS="${SHARDSCOPE_JOBS:-$(nproc)}"

if [ -z "${SHARDSCOPE_SKIP_INSTALL:-}" ]; then
  bash scripts/install-deps.sh >/dev/null
fi
PYTHON="${SHARDSCOPE_PYTHON:-/opt/shardscope/torch-${SHARDSCOPE_TORCH_VERSION:-2.11.0}/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  echo "[build] configuring $BUILD_DIR ($BUILD_TYPE)" >&2
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    -DSHARDSCOPE_PYTHON="$PYTHON" -Wno-dev >"$BUILD_DIR.configure.log" 2>&1 ||
    { cat "$BUILD_DIR.configure.log" >&2; exit 1; }
fi
echo "[build] building (first build from scratch takes several minutes on 2 cores)" >&2
cmake --build "$BUILD_DIR" -j "$JOBS" -- ${SHARDSCOPE_NINJA_TARGETS:-}
