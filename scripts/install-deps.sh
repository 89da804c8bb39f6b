#!/usr/bin/env bash
# Installs what shardscope needs to build, idempotently:
#  - Debian -dev packages (GoogleTest, CLI11, nlohmann-json, simdjson, ImGui, GLFW, ...), and
#    libgloo-dev for the Gloo headers the torch wheel does not ship (headers only; torch carries
#    Gloo's code);
#  - LibTorch from the pinned PyPI `torch` wheel, into a fixed venv outside the repository so that
#    every clone (and CI) reuses it, with the Python tools the tests compare against (HTA,
#    safetensors).
#
# Every step that fails says which step failed and how to fix it: a fresh machine must never see
# a silent exit (dpkg-query exits 1 for packages it does not know, which once killed this script
# under `set -o pipefail` before it installed anything).
#
# SHARDSCOPE_SKIP_TORCH=1 installs the Debian half alone (the install test uses it).
set -euo pipefail

TORCH_VERSION="${SHARDSCOPE_TORCH_VERSION:-2.11.0}"
PREFIX="${SHARDSCOPE_DEPS:-/opt/shardscope}"
VENV="$PREFIX/torch-$TORCH_VERSION"

step="starting"
fail() {
  echo "[install] FAILED: $step" >&2
  [ $# -eq 0 ] || echo "[install] $*" >&2
  exit 1
}
trap 'rc=$?; [ $rc -eq 0 ] || echo "[install] FAILED (exit $rc) at: $step" >&2' EXIT

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build ccache python3 python3-venv
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libsimdjson-dev libcli11-dev
  libspdlog-dev libfmt-dev libimgui-dev libglfw3-dev libstb-dev xvfb libgloo-dev
  pkg-config libgl-dev libgl1-mesa-dri xauth iproute2 zlib1g-dev libprotobuf-dev protobuf-compiler
)
# HTA 0.5 breaks on pandas 3; numpy silences torch's warning when Python loads exported weights.
PYTHON_EXTRAS=(numpy "pandas<3" holistictraceanalysis safetensors)

# One package at a time: dpkg-query's exit status for one name is a plain yes or no, and a name
# it has never heard of is simply missing.
package_installed() {
  local status
  status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
  [ "$status" = "install ok installed" ]
}

step="checking Debian packages with dpkg-query"
command -v dpkg-query >/dev/null || fail "dpkg-query not found: this script expects Debian or Ubuntu; install the packages by hand: ${DEBIAN_PACKAGES[*]}"
missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  package_installed "$p" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "[install] Debian packages: ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || fail "not root and no sudo: run as root, or: apt-get install ${missing[*]}"
    SUDO="sudo"
  fi
  step="apt-get update"
  $SUDO apt-get update -q >&2 || fail "check the network and /etc/apt/sources.list, then run this script again"
  step="apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}" >&2 ||
    fail "apt-get could not install them; see its messages above (a package missing from this release needs a newer Debian, bookworm or later)"
fi

[ -z "${SHARDSCOPE_SKIP_TORCH:-}" ] || { step="done"; exit 0; }

# A stamp written after a verified install keeps later runs from importing torch (seconds). It
# holds the list of what was installed, so adding a Python package installs it once more.
STAMP="$VENV/.shardscope-installed"
WANT="torch==$TORCH_VERSION ${PYTHON_EXTRAS[*]}"
have_torch() {
  [ -f "$STAMP" ] && [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP")" = "$WANT" ] && return 0
  [ -x "$VENV/bin/python" ] &&
    "$VENV/bin/python" -c "import torch,sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null &&
    "$VENV/bin/python" -c "import numpy, pandas, hta, safetensors" 2>/dev/null &&
    echo "$WANT" >"$STAMP"
}
if ! have_torch; then
  echo "[install] $WANT into $VENV (large download, once)" >&2
  step="creating $PREFIX"
  mkdir -p "$PREFIX" || fail "run as root, or set SHARDSCOPE_DEPS to a folder you can write"
  step="finding python3"
  command -v python3 >/dev/null || fail "install python3 and python3-venv"
  step="creating the venv $VENV"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || fail "install python3-venv, or remove a broken $VENV"
  step="pip install $WANT"
  "$VENV/bin/pip" install -q --progress-bar off "torch==$TORCH_VERSION" "${PYTHON_EXTRAS[@]}" >&2 ||
    fail "pip could not install them; check the network (PyPI must be reachable) and the disk space in $PREFIX"
  step="verifying torch==$TORCH_VERSION in $VENV"
  have_torch || fail "the venv's python cannot import torch $TORCH_VERSION and the extras; remove $VENV and run again"
fi
step="done"
