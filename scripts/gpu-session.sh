#!/usr/bin/env bash
# One lease's checks, in order of what matters most (a cut-off run still returns the first):
# the shm backend's collectives on the device (CUDA IPC between rank processes, addresses
# between rank threads) against one device and against Gloo; the host's cost per operator for
# the projection; busbw on the device. Everything goes to $OUT/session.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-check-out}"; mkdir -p "$OUT"
BIN=build-gpu/shardscope; DEV=cuda:0; LOGS=/tmp/gpu-session; mkdir -p "$LOGS"
exec > >(tee -a "$OUT/session.log") 2>&1
step() { echo; echo "=== $* ($(date +%T))"; }
median_step() {
  python3 -c 'import json,sys,statistics as s; d=json.load(open(sys.argv[1])); t=[x["step_time_s"] for x in d["steps"]][2:]; print(f"{sys.argv[2]:44s} median step {s.median(t)*1e3:8.2f} ms over {len(t)} steps")' "$@"
}
bash scripts/gpu-check.sh build || exit 1
step "bench --quick, 4 rank processes on $DEV over shm (device collectives)"
timeout 150 "$BIN" bench --quick --world 4 --device "$DEV" --backend shm --mode processes --format markdown
echo "(rc $?)"
step "ddp_bucketed small world 4 processes bf16: shm on the device, shm staged through the host, gloo"
for how in device host gloo; do
  backend=shm; env=(); [ "$how" = host ] && env=(SHARDSCOPE_SHM_CUDA=host); [ "$how" = gloo ] && backend=gloo
  env "${env[@]}" timeout 60 "$BIN" run --strategy ddp_bucketed --world 4 --mode processes --device "$DEV" \
    --backend "$backend" --preset small --steps 10 --precision bf16 --no-device-tracing --timeout 30 \
    --json "$LOGS/w4-small-$how.json" | grep -E "^(reference|ranks agree|run failed|error)"
  median_step "$LOGS/w4-small-$how.json" "w4 small bf16 $how"
done
step "world 4 processes, tiny and gpt2-small, bf16, untraced: shm (device) and gloo"
for preset in tiny gpt2-small; do
  for backend in shm gloo; do
    timeout 90 "$BIN" run --strategy ddp_bucketed --world 4 --mode processes --device "$DEV" --backend "$backend" \
      --preset "$preset" --steps 10 --no-reference --precision bf16 --no-device-tracing --timeout 60 \
      --json "$LOGS/w4-$preset-$backend.json" | grep -E "^(ranks agree|run failed|error)"
    median_step "$LOGS/w4-$preset-$backend.json" "w4 $preset bf16 $backend"
  done
done
step "host cost per operator on $DEV, bf16 (host.mm_us among them)"
timeout 90 "$BIN" perf --only host-ops --device "$DEV" --precision bf16 --format markdown
step "busbw on $DEV: shm on the device, gloo, shm staged through the host"
timeout 200 "$BIN" perf --only backends --quick --device "$DEV" --format markdown
step "bench --quick, 4 rank threads on $DEV over shm"
timeout 100 "$BIN" bench --quick --world 4 --device "$DEV" --backend shm --mode threads --format markdown
step "engine against the plain loop on $DEV, bf16"
timeout 100 "$BIN" perf --only engine --device "$DEV" --precision bf16 --format markdown
echo "=== done ($(date +%T))"
