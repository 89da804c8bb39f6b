#!/usr/bin/env bash
# Fuzzes the trace readers (native and Chrome JSON) with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer, for SECONDS each (default 60). Needs clang (Debian's clang ships
# libFuzzer). Builds into build-fuzz/, seeds from tests/fuzz/seeds, keeps what it learns in
# build-fuzz/corpus-*. A crash leaves its input in build-fuzz/ (crash-*): add it to
# tests/fuzz/regressions/ so that the trace I/O tests replay it forever after.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-60}"
OUT=build-fuzz
mkdir -p "$OUT"
command -v clang++ >/dev/null || { echo "clang++ not found (apt-get install clang)" >&2; exit 2; }
SOURCES=(profiling/trace/trace.cpp profiling/io/native_trace.cpp profiling/io/chrome_trace.cpp
         profiling/io/chrome_trace_reader.cpp profiling/io/chrome_json_scan.cpp
         profiling/io/chrome_tracks.cpp profiling/metrics/comm_links.cpp)
FLAGS=(-std=c++17 -O1 -g -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
status=0
for format in native json; do
  define=0; [ "$format" = json ] && define=1
  bin="$OUT/trace_${format}_fuzzer"
  if [ ! -x "$bin" ] || [ -n "$(find "${SOURCES[@]}" tests/fuzz/trace_reader_fuzzer.cpp -newer "$bin" 2>/dev/null)" ]; then
    echo "[fuzz] building $bin" >&2
    clang++ "${FLAGS[@]}" -DSHARDSCOPE_FUZZ_FORMAT=$define tests/fuzz/trace_reader_fuzzer.cpp \
      "${SOURCES[@]}" -lsimdjson -o "$bin"
  fi
  corpus="$OUT/corpus-$format"
  mkdir -p "$corpus"
  echo "[fuzz] $format reader for ${SECONDS_EACH}s" >&2
  (cd "$OUT" && "./trace_${format}_fuzzer" -max_total_time="$SECONDS_EACH" -max_len=65536 \
     -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
     "corpus-$format" "../tests/fuzz/seeds/$format") || status=1
done
exit $status
