#!/usr/bin/env bash
# The install script as a fresh machine runs it: dpkg-query knows no package and exits 1 (as the
# real one does for names it has never seen), apt-get records what it is asked. The script must
# get past the check, ask apt-get for every package, and exit 0. Torch's half is left out
# (SHARDSCOPE_SKIP_TORCH): it is already installed and would download gigabytes.
#
# A second case: apt-get fails. The script must exit non-zero and say which step failed.
set -uo pipefail
SCRIPT="${1:?usage: install_deps_test.sh path/to/install-deps.sh}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"

cat >"$work/bin/dpkg-query" <<'STUB'
#!/usr/bin/env bash
for name in "$@"; do
  case "$name" in -*) ;; *) echo "dpkg-query: no packages found matching $name" >&2 ;; esac
done
exit 1
STUB
cat >"$work/bin/apt-get" <<'STUB'
#!/usr/bin/env bash
echo "$*" >>"$APT_LOG"
[ -z "${APT_FAIL:-}" ] || { echo "E: stub apt-get failing on purpose" >&2; exit 100; }
exit 0
STUB
# Not root on some machines: sudo just runs the command.
cat >"$work/bin/sudo" <<'STUB'
#!/usr/bin/env bash
exec "$@"
STUB
chmod +x "$work/bin/"*

failures=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; failures=$((failures + 1)); fi; }

# The package list, read from the script itself (one source of truth).
packages=$(sed -n '/^DEBIAN_PACKAGES=(/,/^)/p' "$SCRIPT" | sed '1s/.*(//; $d' | tr -s ' \n' '\n' | grep -v '^$')
[ -n "$packages" ] || { echo "FAIL: could not read DEBIAN_PACKAGES from $SCRIPT"; exit 1; }

# Every package CMakeLists.txt tells a user to install when it is missing is on the list.
cmake_lists="$(dirname "$SCRIPT")/../CMakeLists.txt"
for p in $(grep -o 'install lib[a-z0-9.+-]*-dev' "$cmake_lists" | sed 's/^install //' | sort -u); do
  check "installs $p, which CMakeLists.txt requires" 'grep -qx "$p" <<<"$packages"'
done

export APT_LOG="$work/apt.log"
: >"$APT_LOG"
PATH="$work/bin:$PATH" SHARDSCOPE_SKIP_TORCH=1 bash "$SCRIPT" >"$work/out" 2>&1
rc=$?
check "exits 0 when no package is installed (got $rc)" '[ $rc -eq 0 ]'
check "runs apt-get update" 'grep -q "^update" "$APT_LOG"'
install_line=$(grep '^install' "$APT_LOG" || true)
for p in $packages; do
  check "asks apt-get for $p" 'tr " " "\n" <<<"$install_line" | grep -qx "$p"'
done

: >"$APT_LOG"
PATH="$work/bin:$PATH" SHARDSCOPE_SKIP_TORCH=1 APT_FAIL=1 bash "$SCRIPT" >"$work/out2" 2>&1
rc=$?
check "exits non-zero when apt-get fails (got $rc)" '[ $rc -ne 0 ]'
check "names the failing step" 'grep -q "FAILED: apt-get update" "$work/out2"'

if ((failures)); then
  echo "--- install output (first case)"; cat "$work/out"
  echo "--- install output (apt-get failing)"; cat "$work/out2"
  exit 1
fi
echo "all install checks passed"
