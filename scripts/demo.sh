#!/usr/bin/env bash
# The main job: builds if needed, then trains the `small` GPT with PyTorch's DDP engine on 4 rank
# threads on the CPU and checks the result against a single-device reference.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARDSCOPE_NINJA_TARGETS=shardscope bash scripts/build.sh
exec "${SHARDSCOPE_BUILD_DIR:-build}/shardscope" run --strategy torch_ddp --world 4 --preset small --steps 5 "$@"
