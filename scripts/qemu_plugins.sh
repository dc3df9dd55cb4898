#!/usr/bin/env bash
# Build the counting QEMU 10: qemu-riscv64 with TCG plugins, from Debian's QEMU source (Debian
# builds its qemu-user without plugins). Only the riscv64 user target. Its plugin API reads
# registers, so the counting plugin there also counts the elements each vector instruction
# processes (vl). URL, hash and configure options: [qemu.counting] of
# toolchain/targets/riscv64-linux-gnu.toml. Result, in the user's cache
# (rvvkit.runtime.counting.vcount.counting_dir()): qemu-riscv64, the tree's qemu-plugin.h, and a stamp.
# Idempotent: a stamp that matches the pinned hash and options means nothing to do.
# Needs: curl, a C compiler, libglib2.0-dev, python3-venv, flex, bison, ninja-build (setup.sh's
# apt list), meson >= 1.5 and pycotap (pip, installed here when missing).
#   bash scripts/qemu_plugins.sh        # RVVKIT_QEMU_PLUGINS_JOBS=N: ninja's -j (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
log() { printf 'qemu_plugins: %s\n' "$*" >&2; }
read -r VERSION URL SHA DEST OPTS < <("$PY" - <<'PYEOF'
from rvvkit.jit import targets
from rvvkit.runtime.counting import vcount
c = targets.riscv().get("qemu", "counting")
print(c["version"], c["url"], c["sha256"], vcount.counting_dir(), ",".join(c["configure"]))
PYEOF
)
STAMP="$SHA $OPTS"
if [ -x "$DEST/qemu-riscv64" ] && [ -f "$DEST/qemu-plugin.h" ] &&
        [ "$(cat "$DEST/stamp" 2>/dev/null)" = "$STAMP" ]; then
    log "counting QEMU present: $DEST/qemu-riscv64"
    exit 0
fi
# meson and pycotap: QEMU's configure looks for them before it would fetch its own (Debian's
# source tarball carries no wheels)
if ! "$PY" -c 'import mesonbuild, pycotap' 2>/dev/null; then
    log "installing meson and pycotap (pip)"
    "$PY" -m pip install -q --disable-pip-version-check "meson>=1.5" "pycotap==1.3.1"
fi
command -v ninja >/dev/null || "$PY" -m pip install -q --disable-pip-version-check ninja
t0=$(date +%s)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log "fetching $URL"
curl -fsSL --retry 3 -o "$tmp/qemu.tar.xz" "$URL"
echo "$SHA  $tmp/qemu.tar.xz" | sha256sum -c --status || { log "hash mismatch for $URL"; exit 1; }
tar -xJf "$tmp/qemu.tar.xz" -C "$tmp"
src="$tmp/qemu-$VERSION"
t1=$(date +%s)
log "configuring and building qemu-riscv64 $VERSION with plugins (about a minute at -j2)"
IFS=, read -r -a opts <<<"$OPTS"
(cd "$src" && ./configure --python="$(command -v "$PY")" "${opts[@]}" >"$tmp/configure.log" 2>&1) ||
    { tail -30 "$tmp/configure.log" >&2; log "configure failed"; exit 1; }
ninja -C "$src/build" -j "${RVVKIT_QEMU_PLUGINS_JOBS:-2}" qemu-riscv64 >"$tmp/ninja.log" 2>&1 ||
    { tail -30 "$tmp/ninja.log" >&2; log "build failed"; exit 1; }
mkdir -p "$DEST"
install -m 0755 "$src/build/qemu-riscv64" "$DEST/qemu-riscv64.tmp"
mv "$DEST/qemu-riscv64.tmp" "$DEST/qemu-riscv64"
install -m 0644 "$src/include/qemu/qemu-plugin.h" "$DEST/qemu-plugin.h"
printf '%s\n' "$STAMP" >"$DEST/stamp"
t2=$(date +%s)
log "installed $("$DEST/qemu-riscv64" --version | head -1) at $DEST" \
    "(download+extract $((t1 - t0)) s, configure+build $((t2 - t1)) s)"
