#!/usr/bin/env bash
# Re-records the small traces in assets/traces (used by the GUI tests and the README tour) and
# the README's screenshots in assets/screenshots. Needs a built binary and Xvfb.
set -euo pipefail
cd "$(dirname "$0")/.."
B="${SHARDSCOPE_BUILD_DIR:-build}/shardscope"
T=assets/traces
mkdir -p "$T" assets/screenshots
# ($T/fsdp-w4-v1.sst and $T/failed-w2-v2.sst are kept as written by versions 1 and 2 of the
# format, for the test that old files still open: they are not re-recorded.)
common=(--preset tiny --steps 3 --quiet)
"$B" run --strategy ddp_bucketed --world 2 --bucket-mb 0.1 "${common[@]}" --trace "$T/ddp_bucketed-w2.sst"
"$B" run --strategy ddp_bucketed --world 2 --bucket-mb 0.1 --no-overlap "${common[@]}" --trace "$T/ddp_bucketed-no-overlap-w2.sst"
"$B" run --strategy torch_ddp --world 4 "${common[@]}" --trace "$T/torch_ddp-w4.sst"
"$B" run --strategy zero1 --world 4 "${common[@]}" --trace "$T/zero1-w4.sst"
"$B" run --strategy zero2 --world 4 "${common[@]}" --trace "$T/zero2-w4.sst"
"$B" run --strategy fsdp --world 4 "${common[@]}" --trace "$T/fsdp-w4.sst"
"$B" run --strategy pp --world 2 --micro-batches 4 --micro-batch 4 --schedule gpipe "${common[@]}" --trace "$T/pp-gpipe-w2.sst"
"$B" run --strategy cp --world 4 --seq 256 --micro-batch 2 "${common[@]}" --trace "$T/cp-w4.sst"
"$B" run --strategy ep --world 4 --experts 8 --top-k 2 --seq 128 --d-model 128 "${common[@]}" --trace "$T/ep-w4.sst"
"$B" run --strategy ddp_bucketed --world 2 --inject-fault rank=1,step=1,kind=throw "${common[@]}" --trace "$T/failed-w2.sst" || true
if [ "${1:-}" = "--screenshots" ]; then
  for tour in scripts/tour/*.script; do
    size=1600x900
    # The Memory tab's side-by-side bars and their names sit below the charts over time.
    case "$tour" in *memory*) size=1600x1200 ;; esac
    xvfb-run -a -s '-screen 0 1920x1280x24' "$B" gui --script "$tour" --size "$size" --frames 3
  done
fi
ls -la "$T"
