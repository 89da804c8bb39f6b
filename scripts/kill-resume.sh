#!/usr/bin/env bash
# Kill -9 the launcher at a random moment (often in the middle of writing a checkpoint), resume
# from what is on disk, and check that the resumed run ends bitwise where an uninterrupted run
# ends. Repeats N times (default 10); prints one line per trial and exits 1 if any differs.
#
#   scripts/kill-resume.sh 31
#   STRATEGY=fsdp MODE=processes scripts/kill-resume.sh
set -u
cd "$(dirname "$0")/.."
BIN=${SHARDSCOPE:-build/shardscope}
TRIALS=${1:-10}
STRATEGY=${STRATEGY:-zero2}
MODE=${MODE:-threads}
WORK=$(mktemp -d /tmp/shardscope-kill-resume-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
[ -x "$BIN" ] || { echo "error: $BIN is not built (run scripts/demo.sh first)" >&2; exit 2; }
ARGS=(run --strategy "$STRATEGY" --world 4 --mode "$MODE" --steps 60 --no-reference --quiet)

checksum() { grep -o '"checksum": *"[0-9a-f]*"' "$1" | head -1 | grep -o '[0-9a-f]\{16\}'; }
"$BIN" "${ARGS[@]}" --json "$WORK/whole.json" >/dev/null 2>&1 || { echo "the uninterrupted run failed"; exit 1; }
expected=$(checksum "$WORK/whole.json")
echo "uninterrupted: $expected"

failures=0
for trial in $(seq "$TRIALS"); do
  ck="$WORK/ck$trial"
  "$BIN" "${ARGS[@]}" --checkpoint-dir "$ck" --checkpoint-every 1 >/dev/null 2>&1 &
  pid=$!
  sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  step=$(cat "$ck/latest" 2>/dev/null || echo none)
  if "$BIN" "${ARGS[@]}" --checkpoint-dir "$ck" --checkpoint-every 1 --resume "$ck" \
    --json "$WORK/resumed$trial.json" >"$WORK/resume$trial.log" 2>&1; then
    got=$(checksum "$WORK/resumed$trial.json")
  elif grep -qE "no valid checkpoint|no such directory" "$WORK/resume$trial.log"; then
    # Killed before the first checkpoint was complete: a fresh start is the right answer.
    "$BIN" "${ARGS[@]}" --json "$WORK/resumed$trial.json" >/dev/null 2>&1
    got=$(checksum "$WORK/resumed$trial.json")
    step="none (killed before the first)"
  else
    got="resume failed: $(tail -1 "$WORK/resume$trial.log")"
  fi
  if [ "$got" = "$expected" ]; then
    echo "trial $trial: killed at latest=$step; resumed bitwise"
  else
    echo "trial $trial: killed at latest=$step; DIFFERS: $got"
    failures=$((failures + 1))
  fi
done
echo "$((TRIALS - failures)) of $TRIALS resumed bitwise"
[ "$failures" -eq 0 ]
