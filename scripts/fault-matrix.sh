#!/usr/bin/env bash
# The fault matrix: every way a run ends early (a rank that throws, a rank process that exits or
# hangs, Ctrl-C, SIGTERM) x mode (threads, processes) x strategy. For each it measures how long
# the run took to stop once the fault happened, and checks what a user is promised: the exit
# code, the failed rank named (or the stop and resume hint), the trace written and readable, the
# checkpoint valid, and no rank process left behind. Prints a Markdown table; exits 1 if any row
# broke a promise.
#
#   scripts/fault-matrix.sh                      # every strategy below, about 2 minutes
#   STRATEGIES=zero2,fsdp scripts/fault-matrix.sh
#   SHARDSCOPE=build-asan/shardscope TIMEOUT=10 scripts/fault-matrix.sh
set -u
cd "$(dirname "$0")/.."
BIN=${SHARDSCOPE:-build/shardscope}
STRATEGIES=${STRATEGIES:-ddp_bucketed,torch_ddp,zero1,zero2,fsdp,tp,pp}
TIMEOUT=${TIMEOUT:-5}  # collective timeout (s): how long the others wait for a hung rank
WORK=$(mktemp -d /tmp/shardscope-faults-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
[ -x "$BIN" ] || { echo "error: $BIN is not built (run scripts/demo.sh first)" >&2; exit 2; }

now() { date +%s.%N; }
# Waits until `file` has a line for step `step` (the run prints "   N  loss  time"); 60 s at most.
wait_for_step() {
  local file=$1 step=$2
  for _ in $(seq 3000); do
    grep -qE "^ +$step  " "$file" 2>/dev/null && return 0
    sleep 0.02
  done
  return 1
}
workers_left() { pgrep -f "worker --config $WORK/" | wc -l; }

failures=0
echo "| fault | mode | strategy | exit | stopped after (s) | reported | trace events | checkpoint | processes left |"
echo "|---|---|---|---|---|---|---|---|---|"
IFS=, read -ra strategy_list <<<"$STRATEGIES"
for strategy in "${strategy_list[@]}"; do
  for row in throw:threads throw:processes exit:processes hang:processes SIGINT:threads \
    SIGTERM:threads SIGTERM:processes; do
    fault=${row%%:*} mode=${row##*:}
    case_dir="$WORK/$strategy-$fault-$mode"
    mkdir -p "$case_dir"
    out="$case_dir/out" trace="$case_dir/trace.sst" checkpoints="$case_dir/checkpoints"
    args=(run --strategy "$strategy" --world 2 --preset tiny --mode "$mode" --timeout "$TIMEOUT"
      --no-reference --trace "$trace" --checkpoint-dir "$checkpoints" --checkpoint-every 1)
    if [[ $fault == SIG* ]]; then
      args+=(--steps 400)
      expected_exit=$((128 + $(kill -l "$fault")))
    else
      args+=(--steps 6 --inject-fault "rank=1,step=3,kind=$fault")
      expected_exit=1
    fi
    # Its own process group, so that the signal goes to the launcher only, as a scheduler's
    # SIGTERM would (Ctrl-C in a terminal reaches the rank processes too; both work).
    setsid "$BIN" "${args[@]}" >"$out" 2>&1 &
    pid=$!
    if [[ $fault == SIG* ]]; then
      wait_for_step "$out" 3
      t_fault=$(now)
      kill -s "$fault" "$pid"
    else
      # The fault strikes when rank 1 starts step 3, just after rank 0 printed step 2.
      wait_for_step "$out" 2
      t_fault=$(now)
    fi
    wait "$pid"
    code=$?
    t_end=$(now)
    stopped=$(awk -v a="$t_fault" -v b="$t_end" 'BEGIN { printf "%.2f", b - a }')
    if [[ $fault == SIG* ]]; then
      grep -q "stopped by $fault" "$out" && grep -q -- "--resume $checkpoints" "$out" &&
        reported=yes || reported=NO
    else
      grep -q "rank 1 failed" "$out" && reported="rank 1" || reported=NO
    fi
    events=$("$BIN" report "$trace" 2>/dev/null | sed -n 's/.* \([0-9][0-9]*\) events.*/\1/p' | head -1)
    [ -n "$events" ] || events=$(grep -o "([0-9]* events)" "$out" | tr -dc 0-9)
    checkpoint=$(cat "$checkpoints/latest" 2>/dev/null || echo none)
    left=$(workers_left)
    verdict=""
    if [ "$code" != "$expected_exit" ] || [ "$reported" = NO ] || [ -z "$events" ] ||
      [ "$left" != 0 ] || [ "$checkpoint" = none ]; then
      verdict=" **broken**"
      failures=$((failures + 1))
      sed 's/^/    /' "$out" | tail -15 >&2
    fi
    echo "| $fault | $mode | $strategy | $code (expect $expected_exit) | $stopped | $reported | ${events:-none} | $checkpoint | $left$verdict |"
  done
done
[ "$failures" = 0 ] || { echo "$failures rows broke a promise" >&2; exit 1; }
