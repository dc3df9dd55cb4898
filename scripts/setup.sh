#!/usr/bin/env bash
# Set up a fresh Debian 12 (or Ubuntu) machine for rvvkit: compilers, QEMU, the riscv64 sysroot,
# and the Python package with its test/bench extras. Idempotent: re-running only checks.
#   bash scripts/setup.sh            # everything
#   bash scripts/setup.sh --board    # and the emulated Debian riscv64 board the tests use
#                                    # (scripts/debian_board.sh build: root, network, ~0.9 GB)
#   RVVKIT_SKIP_APT=1 bash ...       # Python part only (no root needed)
set -euo pipefail
BOARD=0
for arg in "$@"; do
    case "$arg" in
        --board) BOARD=1 ;;
        *) printf 'setup: unknown option %s (use --board or nothing)\n' "$arg" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."

# What the facts of toolchain/targets/*.toml need on Debian: the compilers they list, QEMU, the
# riscv64 sysroot ([qemu] sysroot). Where rvvkit looks for each is in those files, not here.
APT_PACKAGES=(
    build-essential          # host gcc/g++: the host JIT
    binutils                 # readelf/objcopy read artifacts
    qemu-user                # qemu-riscv64 runs RVV 1.0 user-mode binaries
    gcc-riscv64-linux-gnu g++-riscv64-linux-gnu libc6-dev-riscv64-cross  # cross gcc + sysroot
    clang-16 lld-16          # RVV intrinsics (API 0.11) and RVV auto-vectorisation
    openssh-server           # loopback sshd for the remote-board tests
    dropbear-bin             # loopback Dropbear: the tests of boards without SFTP
    curl                     # scripts/qemu_check.sh fetches the checking QEMU (10.0)
    # scripts/qemu_plugins.sh builds the counting QEMU 10 (plugins that read vl) from source
    libglib2.0-dev pkg-config python3-venv ninja-build flex bison
)

log() { printf 'setup: %s\n' "$*" >&2; }

missing_apt() {
    local p out=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || out+=("$p")
    done
    printf '%s\n' "${out[@]:-}"
}

if [ "${RVVKIT_SKIP_APT:-0}" != 1 ] && command -v apt-get >/dev/null; then
    mapfile -t need < <(missing_apt | sed '/^$/d')
    if [ "${#need[@]}" -gt 0 ]; then
        SUDO=""
        [ "$(id -u)" -eq 0 ] || SUDO="sudo"
        log "installing apt packages: ${need[*]}"
        export DEBIAN_FRONTEND=noninteractive
        $SUDO apt-get update -qq
        $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    else
        log "apt packages already installed"
    fi
fi

PY="${PYTHON:-python3}"
log "installing rvvkit (editable) with test and bench extras using $($PY --version)"
$PY -m pip install -q --disable-pip-version-check -e ".[dev]"

if [ -x scripts/build_plugin.sh ]; then
    bash scripts/build_plugin.sh
fi
# QEMU 10 traps extensions a -cpu leaves out (7.2 runs them): the ISA profiles' check
bash scripts/qemu_check.sh
# QEMU 10 built with TCG plugins, whose plugins read vl: the VL-weighted counts (cached; a cold
# build takes about 2 minutes at -j2). Without it LMUL-weighted counts still work (QEMU 7.2).
bash scripts/qemu_plugins.sh ||
    log "WARNING: the counting QEMU 10 could not be built (see above): no VL-weighted counts"
if [ "$BOARD" = 1 ]; then
    # Cached under /var/cache/rvvkit-board: a no-op once built. A machine that cannot build it
    # (no root, no binfmt_misc, no network) still gets the rest: the board's tests then fail
    # under CI=true with the build's own message, and skip with it elsewhere.
    bash scripts/debian_board.sh build ||
        log "WARNING: the emulated Debian board could not be built (see above)"
fi
log "done: try 'rvvkit --help' or 'bash examples/quickstart.sh'"
