#!/usr/bin/env bash
# The GPU checks on a lent machine (PyTorch, CMake, ninja and CUDA, but no Debian -dev packages,
# no network, and 10 minutes a command). Prepare here with scripts/gpu-kit.sh, then two calls of
# the device tool, the second while the machine is still warm (build-gpu/ lives on it):
#   run(carry=[".gpukit"], command="bash scripts/gpu-check.sh build")
#   run(carry=[".gpukit"], command="bash scripts/gpu-check.sh run")
# (`all`, the default, does both in one command where 10 minutes is enough.)
# GPU_TESTS=ON also builds the test suites, linking the kit's GoogleTest (built by Debian's
# compiler; a much newer toolchain there may refuse it).
# Builds the command line alone (no GUI) against that machine's own PyTorch into build-gpu/, then
# runs what issue 6 asks of a GPU: `bench --quick` with 4 ranks sharing cuda:0 over Gloo in
# threads and processes mode, world 1 over NCCL, the same at `small`, and a CUPTI-traced run.
# Everything it prints also goes to $OUT/gpu-check.log (or gpu-check-out/ outside the tool).
set -uo pipefail
cd "$(dirname "$0")/.."
PHASE="${1:-all}"
case "$PHASE" in all|build|run) ;; *) echo "usage: scripts/gpu-check.sh [all|build|run]" >&2; exit 2;; esac
OUT="${OUT:-gpu-check-out}"
mkdir -p "$OUT"
LOG="$OUT/gpu-check.log"
# The build's own logs stay on the machine: the device tool brings back at most 8 files.
BUILD_LOGS="${TMPDIR:-/tmp}/gpu-check-build"
mkdir -p "$BUILD_LOGS"
KIT=/tmp/shardscope-gpukit
PY="${GPU_PYTHON:-$(command -v python3)}"  # the machine's own PyTorch
BIN="${GPU_BIN:-build-gpu/shardscope}"
DEV="${GPU_DEVICE:-cuda:0}"  # GPU_DEVICE=cpu tries the run phase without a GPU
exec > >(tee -a "$LOG") 2>&1
TEE=$!
# Whatever ends the script, tee gets to write the last lines before it goes.
finish() { local rc=$?; exec >&- 2>&-; wait "$TEE" 2>/dev/null; exit "$rc"; }
trap finish EXIT

step() { echo; echo "=== $* ($(date +%T))"; }

if [ "$PHASE" != run ]; then
  step "machine"
  nvidia-smi -L || echo "nvidia-smi: none"
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
  step "unpacking .gpukit into $KIT"
  compgen -G ".gpukit/*.deb" >/dev/null || { echo "no .gpukit/*.deb: run scripts/gpu-kit.sh here and carry .gpukit" >&2; exit 2; }
  mkdir -p "$KIT"
  for deb in .gpukit/*.deb; do dpkg -x "$deb" "$KIT" || exit 1; done
  step "configure build-gpu"
  # Another compiler than ours may warn where ours does not: warnings stay warnings here.
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDSCOPE_BUILD_GUI=OFF \
    -DSHARDSCOPE_BUILD_TESTS="${GPU_TESTS:-OFF}" -DSHARDSCOPE_WARNINGS_AS_ERRORS="${GPU_WERROR:-OFF}" \
    -DSHARDSCOPE_PYTHON="$PY" -DCMAKE_PREFIX_PATH="$KIT/usr" \
    -DSHARDSCOPE_GLOO_INCLUDE="$KIT/usr/include" -Wno-dev >"$BUILD_LOGS/configure.log" 2>&1 ||
    { tail -40 "$BUILD_LOGS/configure.log"; exit 1; }
  grep -E "LibTorch|CUPTI|shardscope:" "$BUILD_LOGS/configure.log"
  step "build (-j$(nproc))"
  start=$(date +%s)
  cmake --build build-gpu -j "$(nproc)" >"$BUILD_LOGS/build.log" 2>&1 || { grep -B2 -A12 "error" "$BUILD_LOGS/build.log" | head -80; exit 1; }
  echo "built in $(( $(date +%s) - start )) s; $(grep -c "warning:" "$BUILD_LOGS/build.log") warnings"
fi
[ "$PHASE" = build ] && exit 0
[ -x "$BIN" ] || { echo "$BIN missing: run the build phase first" >&2; exit 2; }

status=0
# GPU_SECTIONS picks sections of the run phase by name (default: all of them), to spend a lease
# only on what changed: bench-threads bench-processes nccl cupti cupti-kineto cupti-processes
# world1 world1-bf16 hang projection memory bench-small ep engine-cost world4 world4-untraced
# shm-threads host-ops world1-untraced turn-drain.
want() { [ -z "${GPU_SECTIONS:-}" ] || [[ " $GPU_SECTIONS " == *" $1 "* ]]; }
bench() {
  local name="$1"; shift
  step "bench $name: $*"
  local start=$(date +%s)
  "$BIN" bench "$@" --format markdown || { echo "(exit $?)"; status=1; }
  echo "($name: $(( $(date +%s) - start )) s)"
}
# In order of what matters most, each step on its own: one that fails is named and the rest go on.
want bench-threads &&
  bench "threads, 4 ranks on $DEV over gloo" --quick --world 4 --device "$DEV" --backend gloo --mode threads
want bench-processes &&
  bench "processes, 4 ranks on $DEV over gloo" --quick --world 4 --device "$DEV" --backend gloo --mode processes
# The shared-memory backend (the default for ranks of one host), staging CUDA tensors through
# host memory: trains and matches one device, and its step times beside Gloo's above.
want shm &&
  bench "processes, 4 ranks on $DEV over shm" --quick --world 4 --device "$DEV" --backend shm --mode processes
want shm-threads &&
  bench "threads, 4 ranks on $DEV over shm" --quick --world 4 --device "$DEV" --backend shm --mode threads
# Issue 34: the host's cost per operator of each kind in C++ on this GPU, and our GPT's census.
want host-ops && for precision in bf16 fp32; do
  step "host cost per operator on $DEV, $precision"
  "$BIN" perf --only host-ops --device "$DEV" --precision "$precision" --format markdown || status=1
done
if want nccl; then
  bench "world 1 over nccl" --quick --world 1 --device "$DEV" --backend nccl
  bench "auto backend, world 1" --quick --world 1 --device "$DEV" --backend auto --strategies single,ddp_bucketed
fi

want cupti && {
step "CUPTI trace: ddp_bucketed, 4 ranks on $DEV (Chrome JSON and native)"
"$BIN" run --strategy ddp_bucketed --world 4 --device "$DEV" --backend gloo --preset small --steps 3 \
  --no-reference --trace "$OUT/cuda-ddp_bucketed.json" || status=1
"$BIN" report "$OUT/cuda-ddp_bucketed.json" || status=1
"$BIN" run --strategy ddp_bucketed --world 4 --device "$DEV" --backend gloo --preset small --steps 6 \
  --no-reference --trace "$OUT/cuda-ddp_bucketed-w4.sst" || status=1
}

# Kineto's shape, one file per rank with each kernel's correlation id and its launching call:
# what tells whether a kernel went to the rank whose thread launched it.
# The device tool brings back 8 files at most: the rank files travel as one archive.
want cupti-kineto && {
step "CUPTI trace for HTA: ddp_bucketed, 4 ranks on $DEV, one Kineto file per rank"
"$BIN" run --strategy ddp_bucketed --world 4 --device "$DEV" --backend gloo --preset small --steps 2 \
  --no-reference --trace "$BUILD_LOGS/cupti-kineto/" | tail -3 || status=1
tar czf "$OUT/cupti-kineto.tgz" -C "$BUILD_LOGS" cupti-kineto || status=1
}

# Issue 37 §2: every rank process traces its own kernels with CUPTI and sends them back; the
# launcher merges them, each on its rank's lanes.
want cupti-processes && {
step "CUPTI in rank processes: ddp_bucketed and fsdp, 4 processes on $DEV, one Kineto file per rank"
for strategy in ddp_bucketed fsdp; do
  "$BIN" run --strategy "$strategy" --world 4 --mode processes --device "$DEV" --backend gloo \
    --preset small --steps 3 --no-reference --trace "$BUILD_LOGS/cupti-processes-$strategy/" |
    grep -E "^(ranks agree|device tracing|trace written|run failed)" || status=1
done
tar czf "$OUT/cupti-processes.tgz" -C "$BUILD_LOGS" cupti-processes-ddp_bucketed cupti-processes-fsdp || status=1
}

# Issue 34's measured points: a whole step at world 1 of each small preset, for the projection of
# the same configuration to be compared with.
# world1-bf16: the same under bf16 autocast, the precision `project` prices.
for precision in fp32 bf16; do
  section=world1; [ "$precision" = bf16 ] && section=world1-bf16
  want "$section" || continue
  for preset in tiny small gpt2-small; do
    step "world 1, $preset, $precision, on $DEV: measured step time"
    "$BIN" run --preset "$preset" --world 1 --device "$DEV" --steps 10 --no-reference \
      --precision "$precision" --json "$BUILD_LOGS/world1-$preset.json" |
      grep -E "^ +[0-9]+ +[0-9.]+ +[0-9.]+ s" || status=1
    "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("wall_s", d["wall_s"], "steps", d.get("steps"))' \
      "$BUILD_LOGS/world1-$preset.json" || status=1
  done
done

# Issue 37: do the strategies that wait inside backward still hang in processes mode on one GPU,
# and does it go when ranks do not take turns (--contended)?
want hang && for strategy in fsdp torch_ddp zero2 tp; do
  for how in turns contended; do
    flag=(); [ "$how" = contended ] && flag=(--contended)
    step "processes on $DEV: $strategy, world 2, $how"
    start=$(date +%s)
    timeout 40 "$BIN" run --strategy "$strategy" --world 2 --mode processes --device "$DEV" \
      --backend gloo --preset small --steps 3 --timeout 10 "${flag[@]}" 2>&1 |
      grep -E "^(reference|ranks agree|run failed|rank [0-9]|error)" | head -5
    echo "($strategy $how: rc ${PIPESTATUS[0]}, $(( $(date +%s) - start )) s)"
  done
done

want projection && {
step "projection: world 1 small on $DEV, projected onto 8xH100 against its own measured step"
"$BIN" run --preset small --world 1 --device "$DEV" --steps 10 --no-reference \
  --trace "$OUT/cuda-single-w1.sst" || status=1
"$BIN" report "$OUT/cuda-single-w1.sst" || status=1
for hw in 8xH100; do
  "$BIN" project "$OUT/cuda-single-w1.sst" --hardware "$hw" || status=1
  "$BIN" project "$OUT/cuda-single-w1.sst" --hardware "$hw" --compute-scale 1 --json || status=1
done
step "what-if: the world-4 ddp_bucketed run onto 8xH100"
[ -f "$OUT/cuda-ddp_bucketed-w4.sst" ] && { "$BIN" project "$OUT/cuda-ddp_bucketed-w4.sst" --hardware 8xH100 || status=1; }
}

want memory && {
step "memory: our allocator hook against torch.cuda.max_memory_allocated, a process per rank"
for strategy in ${GPU_MEMORY_STRATEGIES:-ddp_flat ddp_flat+zero1 ddp_bucketed ddp_bucketed+zero1 zero1 zero2 \
    fsdp tp pp torch_ddp torch_ddp+zero1 cp ep hybrid}; do
  world=4; [ "$strategy" = tp ] && world=2  # small's 6 heads split over 2 ranks, not 4
  extra=(); [ "$strategy" = ep ] && extra=(--experts 4 --top-k 2)
  file="${strategy//+/-}"
  # What nvidia-smi shows per process (the seed's "peak per process"): the CUDA context and the
  # caching allocator's reserve on top of the tensors, sampled while the run goes.
  ( while sleep 0.3; do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits; done ) \
    >"${BUILD_LOGS}/smi-$file.csv" 2>/dev/null &
  sampler=$!
  "$BIN" run --strategy "$strategy" --world "$world" --mode processes --device "$DEV" --backend gloo \
    --preset small --steps 3 --timeout 30 --trace "${BUILD_LOGS}/mem-$file.sst" "${extra[@]}" \
    --json "${BUILD_LOGS}/mem-$file.json" 2>&1 | grep -E "^(reference|ranks agree|run failed|  then)" || status=1
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  sort -t, -k2 -n "${BUILD_LOGS}/smi-$file.csv" | awk -F, '{m[$1]=$2} END {n=0; for (p in m) {printf "%s%s MiB", (n++ ? ", " : "nvidia-smi peak per process: "), m[p]+0}; print ""}'
  "$PY" - "${BUILD_LOGS}/mem-$file.json" "$strategy" <<'PY' || status=1
import json, sys
run = json.load(open(sys.argv[1]))
ranks = run.get("ranks") or run.get("result", {}).get("ranks", [])
worst = 0.0
for r in ranks:
    hook, torch_peak = r["peak_allocated_bytes"], r.get("device_allocator_peak_bytes", 0)
    gap = abs(hook - torch_peak) / torch_peak if torch_peak else float("inf")
    worst = max(worst, gap)
    print(f"{sys.argv[2]:13s} rank {r['rank']}: hook {hook/1e6:8.2f} MB  torch.cuda.max_memory_allocated {torch_peak/1e6:8.2f} MB  gap {gap*100:5.2f} %")
print(f"{sys.argv[2]}: largest gap {worst*100:.2f} % ({'within' if worst <= 0.05 else 'OUTSIDE'} 5 %)")
sys.exit(0 if worst <= 0.05 else 1)
PY
done
}

# Issue 37: expert parallelism, the one strategy bench --quick skips (its tiny model has no experts).
want ep && bench "ep, processes, 4 ranks on $DEV" --quick --world 4 --device "$DEV" --backend gloo \
  --mode processes --strategies ep --experts 4 --top-k 2

# Issue 34: what our engine costs per step on a GPU, beside the plain LibTorch loop, and how much of
# it is CUPTI and how much our own recording (spans, memory tracking): world 1, `small`, bf16.
median_step() {
  "$PY" -c 'import json,sys,statistics as s; d=json.load(open(sys.argv[1])); t=[x["step_time_s"] for x in d["steps"]][2:]; print(f"{sys.argv[2]:34s} median step {s.median(t)*1e3:7.2f} ms over {len(t)} steps")' "$@"
}
want engine-cost && {
for precision in fp32 bf16; do
  step "engine against the plain LibTorch loop on $DEV, $precision (both without CUPTI)"
  "$BIN" perf --only engine --device "$DEV" --precision "$precision" --format markdown || status=1
done
# What CUPTI costs, taken apart: every variant of device tracing, then none, then no tracing at all.
for preset in small tiny gpt2-small; do
  for precision in bf16 fp32; do
    step "what tracing costs a step: $preset, world 1, $precision, on $DEV"
    for how in traced no-runtime no-op-callback no-device-tracing no-tracing; do
      [ "$preset" != small ] && [[ "$how" == no-runtime || "$how" == no-op-callback || "$how" == no-tracing ]] && continue
      env=(); flag=()
      [[ "$how" == no-runtime || "$how" == no-op-callback ]] && env=(SHARDSCOPE_CUPTI="$how")
      [ "$how" = no-device-tracing ] && flag=(--no-device-tracing)
      [ "$how" = no-tracing ] && flag=(--no-tracing)
      env "${env[@]}" "$BIN" run --preset "$preset" --world 1 --device "$DEV" --steps 20 --no-reference \
        --precision "$precision" "${flag[@]}" --json "$BUILD_LOGS/cost-$how.json" >/dev/null || status=1
      median_step "$BUILD_LOGS/cost-$how.json" "$preset $precision $how" || status=1
    done
  done
done
step "what torch.profiler (Kineto, CPU+CUDA) costs eager PyTorch per operator on $DEV"
"$PY" - <<'PY' || status=1
import time, torch
x = torch.randn(256, 256, device="cuda"); w = torch.randn(256, 256, device="cuda")
def loop(n=3000):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): torch.nn.functional.linear(x, w).relu_()
    torch.cuda.synchronize(); return (time.perf_counter() - t) / n / 2 * 1e6
loop(); plain = min(loop() for _ in range(3))
acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
with torch.profiler.profile(activities=acts) as prof:
    loop(); traced = min(loop() for _ in range(3))
print(f"eager op: {plain:.2f} us plain, {traced:.2f} us under torch.profiler: +{traced-plain:.2f} us an op")
PY
}

# Issue 34: 4 rank processes sharing $DEV, each preset, traced, for the projection to be checked.
want world4 && {
mkdir -p "$BUILD_LOGS/world4"
for precision in bf16 fp32; do
  for preset in tiny small gpt2-small; do
    step "world 4 processes on $DEV: ddp_bucketed, $preset, $precision"
    "$BIN" run --strategy ddp_bucketed --world 4 --mode processes --device "$DEV" --backend gloo \
      --preset "$preset" --steps 10 --no-reference --precision "$precision" --timeout 60 \
      --trace "$BUILD_LOGS/world4/w4-$preset-$precision.sst" --json "$BUILD_LOGS/world4/w4-$preset-$precision.json" |
      grep -E "^(ranks agree|run failed|device tracing)" || status=1
    median_step "$BUILD_LOGS/world4/w4-$preset-$precision.json" "w4 $preset $precision" || status=1
  done
done
tar czf "$OUT/world4.tgz" -C "$BUILD_LOGS" world4 || status=1
}

# The same without CUPTI: what 4 rank processes sharing $DEV take a step when no kernel is traced,
# over each backend of GPU_BACKENDS (issue 38: shm stages CUDA tensors through host memory).
want world4-untraced && for backend in ${GPU_BACKENDS:-gloo}; do
  for preset in tiny small gpt2-small; do
    step "world 4 processes on $DEV over $backend: ddp_bucketed, $preset, bf16, no device tracing"
    "$BIN" run --strategy ddp_bucketed --world 4 --mode processes --device "$DEV" --backend "$backend" \
      --preset "$preset" --steps 10 --no-reference --precision bf16 --timeout 60 --no-device-tracing \
      --json "$BUILD_LOGS/w4u-$preset.json" | grep -E "^(ranks agree|run failed|device tracing)" || status=1
    median_step "$BUILD_LOGS/w4u-$preset.json" "w4 $preset bf16 untraced $backend" || status=1
  done
done

# Issue 34's measured points without any tracing: world 1 of each small preset, bf16.
want world1-untraced && for preset in tiny small gpt2-small; do
  "$BIN" run --preset "$preset" --world 1 --device "$DEV" --steps 20 --no-reference --precision bf16 \
    --no-tracing --json "$BUILD_LOGS/w1u-$preset.json" >/dev/null || status=1
  median_step "$BUILD_LOGS/w1u-$preset.json" "w1 $preset bf16 untraced" || status=1
done

# Issue 34: a rank gives its turn up only once the GPU ran its kernels (DeviceTurns'
# drain); without it the next rank's kernels ran beside them, time-sliced between the processes'
# contexts. Both ways: the step untraced, and each rank's recorded kernels (report).
want turn-drain && for drain in 1 0; do
  for preset in small gpt2-small; do
    step "world 4 processes on $DEV over shm: $preset, bf16, SHARDSCOPE_TURN_DRAIN=$drain"
    SHARDSCOPE_TURN_DRAIN=$drain "$BIN" run --strategy ddp_bucketed --world 4 --mode processes \
      --device "$DEV" --backend shm --preset "$preset" --steps 8 --no-reference --precision bf16 \
      --timeout 60 --no-device-tracing --json "$BUILD_LOGS/drain$drain-$preset.json" |
      grep -E "^(ranks agree|run failed)" || status=1
    median_step "$BUILD_LOGS/drain$drain-$preset.json" "w4 $preset drain $drain untraced" || status=1
  done
  SHARDSCOPE_TURN_DRAIN=$drain "$BIN" run --strategy ddp_bucketed --world 4 --mode processes \
    --device "$DEV" --backend shm --preset small --steps 4 --no-reference --precision bf16 \
    --timeout 60 --trace "$BUILD_LOGS/drain$drain-small.sst" | grep -E "^(ranks agree|run failed)"
  "$BIN" report "$BUILD_LOGS/drain$drain-small.sst" | sed -n '/per rank, median/,/^$/p' || status=1
done

want bench-small && bench "small, processes, 4 ranks on $DEV" --preset small --steps 10 --world 4 --device "$DEV" --backend gloo --mode processes
echo; echo "=== gpu-check run phase ends with status $status ($(date +%T))"
exit $status
