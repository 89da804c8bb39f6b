#!/usr/bin/env bash
# Two hosts on one machine: two network namespaces joined by a veth pair (10.77.0.1 and
# 10.77.0.2), one worker in each, started as a scheduler starts them (RANK, WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT). The ranks must meet over that link, and the trained weights must
# be bitwise those of the same run on rank threads. Cases:
#   1. no GLOO_SOCKET_IFNAME: each worker binds Gloo to its address on the route to the master;
#   2. GLOO_SOCKET_IFNAME naming the veth on each side;
#   3. GLOO_SOCKET_IFNAME naming an interface the host lacks: exit 2 naming the variable;
#   4. a worker whose peer never comes: it ends within its collective timeout, with a message;
#   5. torchrun --nnodes 2 with static rendezvous (when the torch venv has torchrun).
# Needs root for `ip netns`; exits 77 (ctest: skipped) and says why where it is not.
set -uo pipefail
BIN="${1:?usage: two_hosts_test.sh path/to/shardscope [path/to/torchrun]}"
TORCHRUN="${2:-}"

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: network namespaces (ip netns) need root; run as root to test two hosts"
  exit 77
fi
command -v ip >/dev/null || { echo "SKIP: 'ip' (iproute2) not found; scripts/install-deps.sh installs it"; exit 77; }

work=$(mktemp -d /tmp/shardscope-two-hosts.XXXXXX)
A="ssA$$" B="ssB$$" VA="sa$$" VB="sb$$"
cleanup() {
  ip netns pids "$A" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns pids "$B" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  if [ "${failures:-1}" -eq 0 ] && [ -z "${SHARDSCOPE_KEEP_TEST_FILES:-}" ]; then rm -rf "$work"; else echo "files kept in $work"; fi
}
trap cleanup EXIT
if ! { ip netns add "$A" && ip netns add "$B" &&
  ip link add "$VA" type veth peer name "$VB" &&
  ip link set "$VA" netns "$A" && ip link set "$VB" netns "$B" &&
  ip -n "$A" addr add 10.77.0.1/24 dev "$VA" && ip -n "$B" addr add 10.77.0.2/24 dev "$VB" &&
  ip -n "$A" link set "$VA" up && ip -n "$B" link set "$VB" up &&
  ip -n "$A" link set lo up && ip -n "$B" link set lo up; } 2>"$work/netns.err"; then
  echo "SKIP: this machine refused to make network namespaces: $(cat "$work/netns.err")"
  exit 77
fi

failures=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi; }

cat >"$work/run.json" <<'JSON'
{"preset": "tiny", "strategy": "ddp_bucketed", "world": 2, "steps": 2, "data": "synthetic",
 "collective_timeout_s": 20, "strategy_options": {"bucket_mb": 0.05}}
JSON
"$BIN" run --config "$work/run.json" --no-reference --json "$work/threads.json" >"$work/threads.out" 2>&1 ||
  { echo "FAIL: the thread run itself failed"; cat "$work/threads.out"; exit 1; }
threads_sum=$(grep -o '"checksum": *"[0-9a-f]*"' "$work/threads.json" | head -1 | grep -o '[0-9a-f]\{16\}')

# Starts rank $1 in namespace $2 with extra environment $3..., output into $work/$case/.
start_worker() {
  local rank=$1 ns=$2
  shift 2
  mkdir -p "$work/$case/host$rank"
  ip netns exec "$ns" env RANK="$rank" WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=10.77.0.1 \
    MASTER_PORT=29610 "$@" "$BIN" worker --config "$work/run.json" --out "$work/$case/host$rank" \
    >"$work/$case/rank$rank.log" 2>&1 &
}
# Waits for the background workers at most $1 seconds; sets `codes` to their exit codes (not in
# a subshell: only this shell can wait for its children).
wait_workers() {
  local deadline=$((SECONDS + $1))
  codes=""
  for pid in $(jobs -p); do
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      kill -9 "$pid"
      wait "$pid" 2>/dev/null
      codes="$codes hung"
    else
      wait "$pid"
      codes="$codes $?"
    fi
  done
}
# The weights both hosts trained, as `collect` reads them (rank 1's files copied over as a user
# would), against the thread run.
collected_checksums_match() {
  cp "$work/$case/host1/"rank-1.* "$work/$case/host0/" &&
    "$BIN" collect "$work/$case/host0" --json "$work/$case/collect.json" >"$work/$case/collect.out" 2>&1 &&
    [ "$(grep -o '"checksum": *"[0-9a-f]*"' "$work/$case/collect.json" | grep -o '[0-9a-f]\{16\}' | sort -u)" = "$threads_sum" ]
}

case=route
start_worker 0 "$A"
start_worker 1 "$B"
wait_workers 90
check "two hosts, no GLOO_SOCKET_IFNAME: both workers exit 0 (got$codes)" '[ "$codes" = " 0 0" ]'
check "two hosts, no GLOO_SOCKET_IFNAME: weights bitwise those of rank threads ($threads_sum)" collected_checksums_match

case=ifname
start_worker 0 "$A" GLOO_SOCKET_IFNAME="$VA"
start_worker 1 "$B" GLOO_SOCKET_IFNAME="$VB"
wait_workers 90
check "GLOO_SOCKET_IFNAME=$VA / $VB: both workers exit 0 (got$codes)" '[ "$codes" = " 0 0" ]'
check "GLOO_SOCKET_IFNAME: weights bitwise those of rank threads" collected_checksums_match

case=bad-ifname
start_worker 1 "$B" GLOO_SOCKET_IFNAME=nosuch0
wait_workers 30
check "GLOO_SOCKET_IFNAME=nosuch0: exit 2 (got$codes)" '[ "$codes" = " 2" ]'
check "GLOO_SOCKET_IFNAME=nosuch0: the message names the variable" 'grep -q "GLOO_SOCKET_IFNAME.*nosuch0" "$work/$case/rank1.log"'

# Rank 0 hosts the store but rank 1 never comes: rank 0 must give up within its timeout (20 s in
# the config), not block past it.
case=lonely
sed 's/"collective_timeout_s": 20/"collective_timeout_s": 5/' "$work/run.json" >"$work/lonely.json"
t0=$SECONDS
mkdir -p "$work/$case/host0"
ip netns exec "$A" env RANK=0 WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 MASTER_PORT=29611 \
  "$BIN" worker --config "$work/lonely.json" --out "$work/$case/host0" >"$work/$case/rank0.log" 2>&1 &
wait_workers 60
elapsed=$((SECONDS - t0))
check "a worker whose peer never comes fails (got$codes)" '[ "$codes" = " 1" ]'
check "... within its 5 s timeout plus start-up (took ${elapsed} s)" '[ $elapsed -le 25 ]'
check "... and says so on stderr" '[ -s "$work/$case/rank0.log" ]'

# SIGTERM while waiting for a peer ends the worker promptly.
case=sigterm
mkdir -p "$work/$case/host1"
ip netns exec "$B" env RANK=1 WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 MASTER_PORT=29612 \
  "$BIN" worker --config "$work/run.json" --out "$work/$case/host1" >"$work/$case/rank1.log" 2>&1 &
pid=$!
sleep 2
t0=$SECONDS
kill -TERM "$pid"
wait_workers 30
elapsed=$((SECONDS - t0))
check "SIGTERM ends a worker waiting for its master within 10 s (took ${elapsed} s, got$codes)" '[ $elapsed -le 10 ] && [ "$codes" != " hung" ]'

if [ -n "$TORCHRUN" ] && [ -x "$TORCHRUN" ]; then
  case=torchrun
  for rank in 0 1; do
    ns=$A
    [ $rank -eq 0 ] || ns=$B
    mkdir -p "$work/$case/host$rank"
    ip netns exec "$ns" "$TORCHRUN" --nnodes 2 --node-rank "$rank" --nproc-per-node 1 \
      --master-addr 10.77.0.1 --master-port 29613 --no-python \
      "$BIN" worker --config "$work/run.json" --out "$work/$case/host$rank" \
      >"$work/$case/rank$rank.log" 2>&1 &
  done
  wait_workers 120
  check "torchrun --nnodes 2 across the two hosts: both exit 0 (got$codes)" '[ "$codes" = " 0 0" ]'
  check "torchrun: weights bitwise those of rank threads" collected_checksums_match
else
  echo "note: torchrun not given or not found ('$TORCHRUN'): its case is not run"
fi

if ((failures)); then
  for f in "$work"/*/rank*.log "$work"/*/collect.out; do [ -f "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
fi
echo "all two-host checks passed"
