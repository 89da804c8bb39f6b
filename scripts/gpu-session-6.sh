#!/usr/bin/env bash
# For the next lease (written 2026-11-27, not yet run): what Comm handing shm's device path its
# CUDA tensors (no pageable host copies; engine/comm/host_staging.h) does on a shared GPU. Every
# strategy of `bench --quick` must still match one device with four rank processes on the GPU; a
# traced `small` step must show no bucket copied to the host; the steps beside the last leases'
# (four ranks taking turns: small 149-166 ms, contended 57 ms; Gloo 167 ms); and the CUDA twins of
# the device-path tests, Comm's included. Most important first.
#   run(carry=[".gpukit"], command="GPU_TESTS=ON bash scripts/gpu-session-6.sh")
set -uo pipefail
cd "$(dirname "$0")/.."
SESSION=session6 source scripts/gpu-session-common.sh
nvidia-smi -L
bash scripts/gpu-check.sh build || exit 1
echo "=== every strategy, 4 rank processes on $DEV over shm, against one device"
left 120 "bench" && timeout 180 "$BIN" bench --quick --world 4 --device "$DEV" --backend shm \
  --mode processes --format markdown
echo "=== the device path's CUDA tests (GPU_TESTS=ON)"
[ -x build-gpu/tests/engine_tests ] && left 60 "tests" &&
  timeout 90 build-gpu/tests/engine_tests --gtest_filter='ShmDeviceCollectives.*' 2>&1 | tail -4
echo "=== a traced small step: copies to the host per rank"
w4_traced w4-small-1thread
echo "=== steps: 4 rank processes sharing $DEV"
for preset in tiny small gpt2-small; do
  w4 "w4-$preset-turns" "$preset"
  w4 "w4-$preset-contended" "$preset" --contended
done
tar czf "$OUT/session6-json.tgz" -C "$LOGS" . 2>/dev/null
echo "=== done $(date +%T), $(( DEADLINE - $(date +%s) )) s before the deadline"
