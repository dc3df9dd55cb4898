#!/usr/bin/env bash
# Fetch the checking QEMU: qemu-riscv64 10.0 from Debian's bookworm-backports qemu-user package
# (static binaries; Debian builds it without TCG plugins, so it checks but cannot count).
# Unlike Debian 12's QEMU 7.2 it traps every extension its -cpu does not name, so a build run
# under it with an ISA profile's -cpu (toolchain/isa/, rvvkit.load(..., isa=, check=True)) is
# shown to use only that profile's extensions. URL, member and hash come from
# toolchain/targets/riscv64-linux-gnu.toml [qemu.check]; the binary goes to the user's cache
# (rvvkit.jit.isa.check_qemu_path). Idempotent: a binary with the right hash is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
read -r URL MEMBER SHA DEST < <("$PY" - <<'PYEOF'
from rvvkit.jit import isa, targets
c = targets.riscv().get("qemu", "check")
print(c["url"], c["member"], c["sha256"], isa.check_qemu_path())
PYEOF
)
log() { printf 'qemu_check: %s\n' "$*" >&2; }
if [ -f "$DEST" ] && echo "$SHA  $DEST" | sha256sum -c --status; then
    log "checking QEMU present: $DEST"
    exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log "fetching $URL"
curl -fsSL --retry 3 -o "$tmp/qemu-user.deb" "$URL"
dpkg-deb --fsys-tarfile "$tmp/qemu-user.deb" | tar -x -C "$tmp" "$MEMBER"
echo "$SHA  $tmp/$MEMBER" | sha256sum -c --status || { log "hash mismatch for $MEMBER"; exit 1; }
mkdir -p "$(dirname "$DEST")"
install -m 0755 "$tmp/$MEMBER" "$DEST.tmp" && mv "$DEST.tmp" "$DEST"
log "installed $("$DEST" --version | head -1) at $DEST"
