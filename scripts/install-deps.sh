#!/usr/bin/env bash
# Installs what shardscope needs to build, idempotently:
#  - Debian -dev packages (GoogleTest, CLI11, nlohmann-json, ImGui, GLFW, ...), and libgloo-dev for
#    the Gloo headers the torch wheel does not ship (headers only; torch carries Gloo's code);
#  - LibTorch from the pinned PyPI `torch` wheel, into a fixed venv outside the repository so that
#    every clone (and CI) reuses it.
set -euo pipefail

TORCH_VERSION="${SHARDSCOPE_TORCH_VERSION:-2.11.0}"
PREFIX="${SHARDSCOPE_DEPS:-/opt/shardscope}"
VENV="$PREFIX/torch-$TORCH_VERSION"

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build ccache python3 python3-venv
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
  libspdlog-dev libfmt-dev libimgui-dev libglfw3-dev libstb-dev xvfb libgloo-dev
  pkg-config libgl-dev libgl1-mesa-dri xauth
)

missing=()
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${DEBIAN_PACKAGES[@]}" 2>/dev/null |
  awk '/install ok installed/ {print $1}')
for p in "${DEBIAN_PACKAGES[@]}"; do
  grep -qx "$p" <<<"$installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[install] Debian packages: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}" >&2
fi

# A stamp written after a verified install keeps later runs from importing torch (seconds).
STAMP="$VENV/.shardscope-installed"
have_torch() {
  [ -f "$STAMP" ] && [ -x "$VENV/bin/python" ] && return 0
  [ -x "$VENV/bin/python" ] &&
    "$VENV/bin/python" -c "import torch,sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null &&
    touch "$STAMP"
}
if ! have_torch; then
  echo "[install] torch==$TORCH_VERSION into $VENV (large download, once)" >&2
  mkdir -p "$PREFIX"
  PY=python3
  command -v "$PY" >/dev/null || { echo "python3 not found" >&2; exit 1; }
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  # numpy only silences torch's warning when Python loads exported weights in tests.
  "$VENV/bin/pip" install -q --progress-bar off "torch==$TORCH_VERSION" numpy >&2
  have_torch || { echo "torch==$TORCH_VERSION did not install into $VENV" >&2; exit 1; }
fi
