#!/usr/bin/env bash
# `run --trace DIR/` writes a Chakra execution trace per rank (issue 36): a pipeline (sends and
# receives), bucketed DDP (all-reduces overlapping backward) and fsdp (gathers and
# reduce-scatters), each read back by tests/python/chakra_check.py's own protobuf decoder and
# checked against the Kineto files beside them. Skipped (77) in a build without protobuf.
set -euo pipefail
BIN="$1" PY="$2" CHECK="$3"
"$BIN" run --help >/dev/null
DIR=$(mktemp -d "${TMPDIR:-/tmp}/chakra-export.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
for job in "pp --world 2" "ddp_bucketed --world 2" "fsdp --world 2"; do
  name=${job%% *}
  # shellcheck disable=SC2086  # the job's flags are words
  out=$("$BIN" run --strategy $job --steps 3 --no-reference --trace "$DIR/$name/")
  if grep -q "built without protobuf" <<<"$out"; then
    echo "this build has no Chakra export"
    exit 77
  fi
  echo "== $name"
  "$PY" "$CHECK" "$DIR/$name"
done
