#!/usr/bin/env bash
# The lease of 2026-11-27's fifth session: what the projection still lacks from a GPU (issue 34:
# an fp32 GEMM and attention sweep so `project --precision fp32` can be priced; a collective's
# SMs beside a GEMM on this GPU; the copy inside a rank's turn on a shared GPU, now that traces
# name each copy) and issue 38's engine ratio with 40 steps x 5 rounds. Last, whether MPS (one
# GPU context for all rank processes) changes a shared GPU's turns. Most important first; each
# step is skipped once the deadline nears.
#   run(carry=[".gpukit"], command="SESSION_SECONDS=460 bash scripts/gpu-session-5.sh")
set -uo pipefail
cd "$(dirname "$0")/.."
SESSION=session5 source scripts/gpu-session-common.sh
nvidia-smi -L; lscpu | grep -E "^(CPU\(s\)|Model name)"
# Device-timed measurements, the queue filled ahead: they run while the build loads the host.
( timeout 200 python3 scripts/gpu-measure.py --fp32 "$OUT/fp32-sweep.json" >"$OUT/fp32-sweep.log" 2>&1
  timeout 150 python3 scripts/gpu-sm-contention.py "$OUT/sm-contention.json" >"$OUT/sm-contention.log" 2>&1 ) &
measures=$!
bash scripts/gpu-check.sh build || exit 1
echo "=== world 1, small, bf16, untraced (this machine's baseline)"
"$BIN" run --preset small --world 1 --device "$DEV" --steps 30 --no-reference --precision bf16 \
  --no-tracing --json "$LOGS/w1-small.json" >/dev/null && median_step "$LOGS/w1-small.json" "w1 small bf16"
echo "=== the copy in a rank's turn: 4 rank processes sharing $DEV, small, one thread, traced"
w4_traced w4-small-1thread
wait "$measures"; cat "$OUT/fp32-sweep.log" "$OUT/sm-contention.log"
left 100 "engine" && timeout 150 "$BIN" perf --only engine --device "$DEV" --precision bf16 --format markdown
echo "=== 4 rank processes sharing $DEV without MPS, then with"
w4 w4-small-turns small
w4 w4-small-contended small --contended
if left 100 "mps" && command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d && echo "MPS daemon started"
  w4 w4-small-turns-mps small
  w4 w4-small-contended-mps small --contended
  echo quit | nvidia-cuda-mps-control; tail -5 /tmp/mps-log/control.log 2>/dev/null
else
  echo "(no MPS: nvidia-cuda-mps-control missing or too little time)"
fi
tar czf "$OUT/session5-json.tgz" -C "$LOGS" . 2>/dev/null
echo "=== done $(date +%T), $(( DEADLINE - $(date +%s) )) s before the deadline"
