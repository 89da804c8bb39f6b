# What each scripts/gpu-session-N.sh shares (sourced, after `cd` to the repository): where its
# output goes (SESSION names the log and the scratch folder), a deadline its steps check so the
# call ends inside the device tool's limit, and a run's median step from its --json.
OUT="${OUT:-gpu-check-out}"; mkdir -p "$OUT"
BIN=build-gpu/shardscope; DEV=cuda:0; LOGS="/tmp/gpu-$SESSION"; mkdir -p "$LOGS"
DEADLINE=$(( $(date +%s) + ${SESSION_SECONDS:-420} ))
exec > >(tee -a "$OUT/$SESSION.log") 2>&1
left() { [ $(( DEADLINE - $(date +%s) )) -gt "$1" ] || { echo "(skipped: $2, too little time left)"; return 1; }; }
median_step() {
  python3 -c 'import json,sys,statistics as s; d=json.load(open(sys.argv[1])); t=[x["step_time_s"] for x in d["steps"]][2:]; print(f"{sys.argv[2]:44s} median step {s.median(t)*1e3:8.2f} ms over {len(t)} steps")' "$@"
}
# Four rank processes of ddp_bucketed sharing the GPU over shm, bf16, untraced: its median step.
w4() {  # label preset [extra run flags...]
  local label=$1 preset=$2; shift 2
  left 40 "$label" || return 0
  timeout 90 "$BIN" run --strategy ddp_bucketed --world 4 --mode processes --device "$DEV" --backend shm \
    --preset "$preset" --steps 8 --no-reference --precision bf16 --timeout 30 --no-device-tracing "$@" \
    --json "$LOGS/$label.json" | grep -E "^(ranks agree|run failed|error)"
  median_step "$LOGS/$label.json" "$label"
}
# The same, 4 steps traced (CUPTI on, one thread a rank) into $OUT/NAME.sst, and each rank's median
# step from report --measured: what a rank's turn holds, copies named.
w4_traced() {  # name
  left 60 "traced $1" || return 0
  timeout 70 "$BIN" run --strategy ddp_bucketed --world 4 --mode processes --device "$DEV" --backend shm \
    --preset small --steps 4 --no-reference --precision bf16 --timeout 30 --threads-per-rank 1 \
    --trace "$OUT/$1.sst" | grep -E "^(ranks agree|run failed|error)"
  "$BIN" report "$OUT/$1.sst" --measured | sed -n '/per rank, median/,/^$/p'
}
