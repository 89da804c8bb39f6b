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
    -DSHARDSCOPE_GLOO_INCLUDE="$KIT/usr/include" -Wno-dev >"$OUT/configure.log" 2>&1 ||
    { tail -40 "$OUT/configure.log"; exit 1; }
  grep -E "LibTorch|CUPTI|shardscope:" "$OUT/configure.log"
  step "build (-j$(nproc))"
  start=$(date +%s)
  cmake --build build-gpu -j "$(nproc)" >"$OUT/build.log" 2>&1 || { grep -B2 -A12 "error" "$OUT/build.log" | head -80; exit 1; }
  echo "built in $(( $(date +%s) - start )) s; $(grep -c "warning:" "$OUT/build.log") warnings"
fi
[ "$PHASE" = build ] && exit 0
[ -x "$BIN" ] || { echo "$BIN missing: run the build phase first" >&2; exit 2; }

status=0
bench() {
  local name="$1"; shift
  step "bench $name: $*"
  local start=$(date +%s)
  "$BIN" bench "$@" --format markdown || { echo "(exit $?)"; status=1; }
  echo "($name: $(( $(date +%s) - start )) s)"
}
bench "threads, 4 ranks on $DEV over gloo" --quick --world 4 --device "$DEV" --backend gloo --mode threads
bench "processes, 4 ranks on $DEV over gloo" --quick --world 4 --device "$DEV" --backend gloo --mode processes
bench "world 1 over nccl" --quick --world 1 --device "$DEV" --backend nccl
bench "auto backend, world 1" --quick --world 1 --device "$DEV" --backend auto --strategies single,ddp_bucketed
bench "small, processes, 4 ranks on $DEV" --preset small --steps 10 --world 4 --device "$DEV" --backend gloo --mode processes

step "CUPTI trace: ddp_bucketed, 4 ranks on $DEV"
"$BIN" run --strategy ddp_bucketed --world 4 --device "$DEV" --backend gloo --preset small --steps 3 \
  --trace "$OUT/cuda-ddp_bucketed.json" || status=1
"$BIN" report "$OUT/cuda-ddp_bucketed.json" || status=1
exit $status
