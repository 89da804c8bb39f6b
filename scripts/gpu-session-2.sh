#!/usr/bin/env bash
# The second lease of 2026-11-27: where four rank processes sharing the GPU spend their step
# (turns against --contended, and a CUPTI trace of each), for a model of ranks sharing one GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-check-out}"; mkdir -p "$OUT"
BIN=build-gpu/shardscope; DEV=cuda:0; LOGS=/tmp/gpu-session; mkdir -p "$LOGS"
exec > >(tee -a "$OUT/session2.log") 2>&1
median_step() {
  python3 -c 'import json,sys,statistics as s; d=json.load(open(sys.argv[1])); t=[x["step_time_s"] for x in d["steps"]][2:]; print(f"{sys.argv[2]:44s} median step {s.median(t)*1e3:8.2f} ms over {len(t)} steps")' "$@"
}
bash scripts/gpu-check.sh build || exit 1
for preset in small gpt2-small; do
  for how in turns contended; do
    flag=(); [ "$how" = contended ] && flag=(--contended)
    timeout 60 "$BIN" run --strategy ddp_bucketed --world 4 --mode processes --device "$DEV" --backend shm \
      --preset "$preset" --steps 8 --no-reference --precision bf16 --no-device-tracing --timeout 30 "${flag[@]}" \
      --json "$LOGS/$preset-$how.json" | grep -E "^(ranks agree|run failed|error)"
    median_step "$LOGS/$preset-$how.json" "w4 $preset bf16 shm $how"
  done
done
timeout 60 "$BIN" run --strategy ddp_bucketed --world 4 --mode processes --device "$DEV" --backend shm \
  --preset small --steps 4 --no-reference --precision bf16 --timeout 30 --trace "$OUT/w4-small-bf16.sst" |
  grep -E "^(ranks agree|run failed|error|device tracing)"
"$BIN" report "$OUT/w4-small-bf16.sst" | head -60
timeout 60 "$BIN" run --strategy ddp_bucketed --world 4 --mode processes --device "$DEV" --backend shm \
  --preset gpt2-small --steps 3 --no-reference --precision bf16 --timeout 30 --trace "$LOGS/w4-gpt2-small-bf16.sst" |
  grep -E "^(ranks agree|run failed|error|device tracing)"
"$BIN" report "$LOGS/w4-gpt2-small-bf16.sst" | head -60
gzip -c "$LOGS/w4-gpt2-small-bf16.sst" > "$OUT/w4-gpt2-small-bf16.sst.gz"; ls -la "$OUT"
