#!/usr/bin/env bash
# The lease of 2026-11-27's third session (an H200): the turn's drain on a shared GPU, the engine
# against a plain loop, the H200 machine's host costs, and what a collective's SMs cost a GEMM
# beside it. Most important first; each step is skipped once the deadline nears.
#   run(carry=[".gpukit"], command="bash scripts/gpu-session-3.sh")
set -uo pipefail
cd "$(dirname "$0")/.."
SESSION=session3 source scripts/gpu-session-common.sh
nvidia-smi -L
# The GEMM-beside-a-collective measurement needs no build: it runs while the build does (device
# time between events, the queue filled ahead, so the build's load on the host does not show).
( python3 scripts/gpu-sm-contention.py "$OUT/sm-contention.json" >"$OUT/sm-contention.log" 2>&1 ) &
contention=$!
bash scripts/gpu-check.sh build || exit 1
wait "$contention"; cat "$OUT/sm-contention.log"

w4() {  # preset backend drain [extra...]
  local preset=$1 backend=$2 drain=$3; shift 3
  SHARDSCOPE_TURN_DRAIN=$drain timeout 90 "$BIN" run --strategy ddp_bucketed --world 4 --mode processes \
    --device "$DEV" --backend "$backend" --preset "$preset" --steps 8 --no-reference --precision bf16 \
    --timeout 30 "$@" | grep -E "^(ranks agree|run failed|error)"
}
echo "=== turn drain, 4 rank processes on $DEV, ddp_bucketed bf16, no device tracing"
for preset in tiny small gpt2-small; do
  for drain in 1 0; do
    left 40 "drain $drain $preset" || continue
    w4 "$preset" shm "$drain" --no-device-tracing --json "$LOGS/d$drain-$preset.json"
    median_step "$LOGS/d$drain-$preset.json" "w4 $preset shm drain $drain"
  done
done
echo "=== each rank's recorded kernels, small, drain 1 and 0 (CUPTI on)"
for drain in 1 0; do
  left 40 "traced drain $drain" || continue
  SHARDSCOPE_TURN_DRAIN=$drain timeout 60 "$BIN" run --strategy ddp_bucketed --world 4 --mode processes \
    --device "$DEV" --backend shm --preset small --steps 4 --no-reference --precision bf16 --timeout 30 \
    --trace "$LOGS/d$drain-small.sst" | grep -E "^(ranks agree|run failed|error)"
  "$BIN" report "$LOGS/d$drain-small.sst" | sed -n '/per rank, median/,/^$/p'
  cp "$LOGS/d$drain-small.sst" "$OUT/" 2>/dev/null
done
echo "=== world 1, bf16, no tracing"
for preset in tiny small gpt2-small; do
  left 20 "w1 $preset" || continue
  "$BIN" run --preset "$preset" --world 1 --device "$DEV" --steps 20 --no-reference --precision bf16 \
    --no-tracing --json "$LOGS/w1-$preset.json" >/dev/null
  median_step "$LOGS/w1-$preset.json" "w1 $preset bf16 untraced"
done
echo "=== the H200 machine's host cost per operator"
for precision in bf16 fp32; do
  left 30 "host-ops $precision" || continue
  timeout 90 "$BIN" perf --only host-ops --device "$DEV" --precision "$precision" --format markdown
done
left 60 "engine" && timeout 150 "$BIN" perf --only engine --device "$DEV" --precision bf16 --format markdown
echo "=== Gloo beside shm with the drain on"
for preset in tiny small; do
  left 30 "gloo $preset" || continue
  w4 "$preset" gloo 1 --no-device-tracing --json "$LOGS/g-$preset.json"
  median_step "$LOGS/g-$preset.json" "w4 $preset gloo drain 1"
done
tar czf "$OUT/session3-json.tgz" -C "$LOGS" . 2>/dev/null
echo "=== done $(date +%T), $(( DEADLINE - $(date +%s) )) s before the deadline"
