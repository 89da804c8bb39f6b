#!/usr/bin/env bash
# Packs, here, what a lent GPU machine lacks to build shardscope's command line, into .gpukit/
# (ignored by git; name it in the device tool's `carry`). That machine has CMake, ninja, CUDA
# and PyTorch but no Debian -dev packages and no network, so the header-only dependencies travel
# as Debian packages, unpacked there by scripts/gpu-check.sh. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
# simdjson is no header-only library: its shared library (libsimdjson14) travels with its headers.
PACKAGES=(nlohmann-json3-dev libsimdjson-dev libsimdjson14 libcli11-dev libgloo-dev libgtest-dev
          libgmock-dev)
mkdir -p .gpukit
missing=()
for p in "${PACKAGES[@]}"; do
  compgen -G ".gpukit/${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[gpu-kit] downloading ${missing[*]}" >&2
  (cd .gpukit && apt-get download "${missing[@]}" 2>/dev/null) || {
    apt-get update -q >/dev/null && (cd .gpukit && apt-get download "${missing[@]}")
  }
fi
du -sh .gpukit | awk '{print "[gpu-kit] .gpukit holds " $1 "; carry it: run(carry=[\".gpukit\"], command=\"bash scripts/gpu-check.sh\")"}' >&2
