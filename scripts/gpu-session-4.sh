#!/usr/bin/env bash
# The second call of 2026-11-27's third lease (an H200): is the engine's 1.36 on `small` real,
# and what it is made of (host recording against none); does a rank's turn on a shared GPU run
# slower because the other rank processes' threads take the host's cores?
#   run(carry=[".gpukit"], command="bash scripts/gpu-session-4.sh")
set -uo pipefail
cd "$(dirname "$0")/.."
SESSION=session4 source scripts/gpu-session-common.sh
lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|Model name)"
bash scripts/gpu-check.sh build || exit 1
echo "=== world 1, small, bf16: host recording (spans, memory) against none, interleaved"
for round in 1 2 3; do
  for how in recorded none; do
    flag=(--no-device-tracing); [ "$how" = none ] && flag=(--no-tracing)
    "$BIN" run --preset small --world 1 --device "$DEV" --steps 30 --no-reference --precision bf16 \
      "${flag[@]}" --json "$LOGS/w1-$how-$round.json" >/dev/null
    median_step "$LOGS/w1-$how-$round.json" "w1 small bf16 $how (round $round)"
  done
done
echo "=== engine against the plain loop, twice more"
for round in 1 2; do
  left 60 "engine $round" || continue
  timeout 120 "$BIN" perf --only engine --device "$DEV" --precision bf16 --format markdown | grep "^| engine"
done
echo "=== 4 rank processes sharing $DEV: turns with each process's threads, and at once"
for preset in tiny small; do
  w4 "w4-$preset-turns" "$preset"
  w4 "w4-$preset-turns-1thread" "$preset" --threads-per-rank 1
  w4 "w4-$preset-contended" "$preset" --contended
done
w4 "w4-gpt2-small-turns-1thread" gpt2-small --threads-per-rank 1
w4 "w4-gpt2-small-contended" gpt2-small --contended
w4_traced w4-small-1thread
tar czf "$OUT/session4-json.tgz" -C "$LOGS" . 2>/dev/null
echo "=== done $(date +%T), $(( DEADLINE - $(date +%s) )) s before the deadline"
