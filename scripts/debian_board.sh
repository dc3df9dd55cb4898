#!/usr/bin/env bash
# An emulated Debian 13 ("trixie") riscv64 board on this machine: a riscv64 root filesystem
# (debootstrap) whose binaries run under qemu-user-static through binfmt_misc, and an OpenSSH
# server started inside it with chroot, on a loopback port. rvvkit then treats it like any
# board reached with `--on ssh://...`: the board's own GCC 14 / GCC 13 compile the kernels and
# its python3 can run rvvkit itself. Needs root (debootstrap, chroot, mounts).
#
#   bash scripts/debian_board.sh build             # cached: a second run returns in seconds
#   bash scripts/debian_board.sh start PORT [KEYS] # sshd on 127.0.0.1:PORT; KEYS: a public key
#                      # or authorized_keys file (else the file $RVVKIT_BOARD_AUTHORIZED_KEYS names)
#   bash scripts/debian_board.sh stop [PORT]       # one server, or all of them (then unmounts)
#   bash scripts/debian_board.sh path              # the root filesystem's path
#
# Environment: RVVKIT_BOARD_CACHE (default /var/cache/rvvkit-board), RVVKIT_BOARD_MIRROR
# (default http://deb.debian.org/debian), RVVKIT_BOARD_QEMU_CPU (default below).
# The finished root is <cache>/trixie-riscv64 with a stamp file (rvvkit-board.stamp) listing
# its packages. It is built in a temporary directory and renamed when complete, so a build
# that was interrupted is never taken for a finished one; a changed package list rebuilds.
set -euo pipefail

SUITE=trixie
CACHE="${RVVKIT_BOARD_CACHE:-/var/cache/rvvkit-board}"
ROOT="$CACHE/$SUITE-riscv64"
STAMP="$ROOT/rvvkit-board.stamp"
MIRROR="${RVVKIT_BOARD_MIRROR:-http://deb.debian.org/debian}"
# What qemu-user emulates at each exec: RVV 1.0, VLEN 256 (as toolchain/targets' QEMU boards).
QEMU_CPU_STR="${RVVKIT_BOARD_QEMU_CPU:-rv64,v=true,vlen=256,elen=64,vext_spec=v1.0}"
# The board: Debian's default gcc is GCC 14; gcc-13 is the second compiler the tests use.
# python3-ply is listed because debootstrap does not resolve the virtual package that
# python3-cffi's dependency (python3-pycparser) needs.
PACKAGES=(gcc gcc-14 gcc-13 g++ libc6-dev python3 python3-numpy python3-cffi python3-ply
          python3-pycparser python3-pyelftools python3-pip python3-venv openssh-server)
HOST_PACKAGES=(qemu-user-static binfmt-support debootstrap)
BOARD_ETC=/etc/rvvkit-board      # inside the root: sshd config, host key, authorized keys

say() { printf 'debian_board: %s\n' "$*" >&2; }
die() { printf 'debian_board: error: %s\n' "$*" >&2; exit 1; }

need_root() {
    [ "$(id -u)" -eq 0 ] \
        || die "needs root (debootstrap, chroot and mounts): run it as root or with sudo"
}

stamp_text() { printf 'suite=%s\npackages=%s\n' "$SUITE" "${PACKAGES[*]}"; }

is_built() { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(stamp_text)" ]; }

host_setup() {
    local missing=() p
    for p in "${HOST_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        command -v apt-get >/dev/null || die "apt-get missing: install ${missing[*]} yourself"
        say "installing host packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed (no network?)"
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
            || die "apt-get install ${missing[*]} failed"
    fi
    # binfmt_misc lets the kernel run riscv64 ELF files through qemu-riscv64-static; flag F
    # (fix binary) opens the interpreter now, so it works inside the chroot without a copy.
    if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
            || die "cannot mount binfmt_misc (a container without privileges?)"
    fi
    if [ ! -e /proc/sys/fs/binfmt_misc/qemu-riscv64 ]; then
        update-binfmts --enable qemu-riscv64 >/dev/null 2>&1 || true
    fi
    grep -q '^flags:.*F' /proc/sys/fs/binfmt_misc/qemu-riscv64 2>/dev/null \
        || die "no binfmt_misc entry qemu-riscv64 with flag F (update-binfmts --enable ...)"
}

check_network() {
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=20)' \
        "$MIRROR/dists/$SUITE/Release" 2>/dev/null \
        || die "no network: cannot reach $MIRROR (set RVVKIT_BOARD_MIRROR to a Debian mirror)"
}

stage1() {  # SUITE DIR INCLUDE LOG
    debootstrap --arch=riscv64 --variant=minbase --foreign --include="$3" \
        "$1" "$2" "$MIRROR" >>"$4" 2>&1
}

# Did debootstrap fail on fetching or validating a package index (not on a package)?
index_failure() {
    tail -n 3 "$1" | grep -Eq "Couldn't download .*/dists/.*/(Packages|Release)|Packages.* was corrupt"
}

# Is the mirror's dists/ALIAS the same release as $SUITE (its Release's Codename)?
alias_is_suite() {
    python3 -c 'import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=20).read().decode("utf-8", "replace")
sys.exit(0 if ("Codename: " + sys.argv[2]) in text.splitlines() else 1)' \
        "$MIRROR/dists/$1/Release" "$SUITE" 2>/dev/null
}

# Unmount everything under a root (the board's proc/dev, or a failed build's), deepest first.
unmount_under() {
    local dir m
    dir="$(readlink -f "$1")"
    for m in $(awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r); do
        umount -l "$m" 2>/dev/null || true
    done
}

cmd_build() {
    need_root
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.lock"
    flock 9  # one build at a time (parallel test workers call this too)
    if is_built; then
        say "up to date: $ROOT"
        return 0
    fi
    host_setup
    check_network
    local t0 tmp log
    t0=$(date +%s)
    for tmp in "$CACHE"/.build-*; do  # leftovers of interrupted builds
        [ -d "$tmp" ] || continue
        say "removing an unfinished build: $tmp"
        unmount_under "$tmp"
        rm -rf --one-file-system "$tmp"
    done
    tmp="$CACHE/.build-$$"
    log="$CACHE/build.log"
    : >"$log"
    trap 'unmount_under "'"$tmp"'"; rm -rf --one-file-system "'"$tmp"'"' EXIT
    local include
    include=$(IFS=,; echo "${PACKAGES[*]}")
    say "debootstrap stage 1: $SUITE riscv64 from $MIRROR (log: $log)"
    if ! stage1 "$SUITE" "$tmp" "$include" "$log"; then
        # A mirror (or a cache in front of it) caught between two point releases serves
        # package indices that do not match its signed Release, and debootstrap rightly
        # refuses them. The same release under its alias path ("stable") is fetched by other
        # URLs, so it is often whole when the codename path is not: take it only when the
        # alias's own Release says it is $SUITE. Every index is still checked against it.
        if index_failure "$log" && alias_is_suite stable; then
            say "the mirror's $SUITE indices do not match its Release (a mirror mid-update);" \
                "retrying through its 'stable' alias, which is $SUITE"
            unmount_under "$tmp"
            rm -rf --one-file-system "$tmp"
            stage1 stable "$tmp" "$include" "$log" \
                || die "debootstrap (first stage) failed; last line: $(tail -n 1 "$log")"
        else
            die "debootstrap (first stage) failed; last line: $(tail -n 1 "$log")"
        fi
    fi
    say "debootstrap stage 2 in the chroot under qemu-riscv64 (a few minutes)"
    chroot "$tmp" /debootstrap/debootstrap --second-stage >>"$log" 2>&1 \
        || die "debootstrap (second stage) failed; last line: $(tail -n 1 "$log")"
    # Check the board has what the tests rely on before calling it finished.
    chroot "$tmp" /bin/sh -c 'gcc --version && gcc-13 --version && test -x /usr/sbin/sshd &&
        python3 -c "import numpy, cffi, elftools"' >>"$log" 2>&1 \
        || die "the new root lacks gcc, gcc-13, python3 modules or sshd (see $log)"
    chroot "$tmp" apt-get clean >>"$log" 2>&1 || true
    rm -f "$tmp"/etc/ssh/ssh_host_*  # generated by the package; each start makes its own
    stamp_text >"$tmp/rvvkit-board.stamp"
    unmount_under "$tmp"
    if [ -d "$ROOT" ]; then  # an older package list: replace it (stop its servers first)
        cmd_stop_all
        mv "$ROOT" "$CACHE/.build-old-$$"
    fi
    mv "$tmp" "$ROOT"  # the commit point: only now is the root "built"
    trap - EXIT
    rm -rf --one-file-system "$CACHE/.build-old-$$"
    say "built $ROOT in $(( $(date +%s) - t0 )) s ($(du -sh --one-file-system "$ROOT" | cut -f1))"
}

mount_board() {
    mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
    mountpoint -q "$ROOT/dev" || mount --bind /dev "$ROOT/dev"  # /dev/null, urandom, tty
}

pidfile() { echo "$ROOT/run/rvvkit-board-sshd-$1.pid"; }

running_ports() {
    local f pid
    for f in "$ROOT"/run/rvvkit-board-sshd-*.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f" 2>/dev/null || true)
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            basename "$f" .pid | sed 's/^rvvkit-board-sshd-//'
        else
            rm -f "$f"
        fi
    done
}

cmd_start() {
    need_root
    local port="${1:-}" keys="${2:-${RVVKIT_BOARD_AUTHORIZED_KEYS:-}}"
    [[ "$port" =~ ^[0-9]+$ ]] || die "usage: debian_board.sh start PORT [AUTHORIZED_KEYS_FILE]"
    [ -n "$keys" ] && [ -f "$keys" ] \
        || die "no authorized key: pass a public key file or set RVVKIT_BOARD_AUTHORIZED_KEYS"
    is_built || die "the board is not built: run 'bash scripts/debian_board.sh build' first"
    host_setup
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.lock"
    flock 9
    cmd_stop_port "$port"
    mount_board
    local etc="$ROOT$BOARD_ETC"
    mkdir -p "$etc" "$ROOT/run/sshd"
    cp "$keys" "$etc/authorized_keys-$port"
    # A throw-away host key per start (host ssh-keygen: fast; the board's would run under QEMU).
    rm -f "$etc/host_ed25519-$port" "$etc/host_ed25519-$port.pub"
    if command -v ssh-keygen >/dev/null; then
        ssh-keygen -q -t ed25519 -N "" -C rvvkit-board -f "$etc/host_ed25519-$port"
    else
        chroot "$ROOT" ssh-keygen -q -t ed25519 -N "" -C rvvkit-board \
            -f "$BOARD_ETC/host_ed25519-$port"
    fi
    # sshd does not hand its own environment to sessions: SetEnv gives every session QEMU_CPU,
    # which qemu-user reads at each exec, so the board's programs see an RVV 1.0 CPU.
    cat >"$etc/sshd_config-$port" <<EOF
ListenAddress 127.0.0.1:$port
HostKey $BOARD_ETC/host_ed25519-$port
AuthorizedKeysFile $BOARD_ETC/authorized_keys-$port
PidFile /run/rvvkit-board-sshd-$port.pid
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
PrintMotd no
Subsystem sftp internal-sftp
SetEnv QEMU_CPU=$QEMU_CPU_STR
EOF
    say "starting sshd in $ROOT on 127.0.0.1:$port (QEMU_CPU=$QEMU_CPU_STR)"
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin QEMU_CPU="$QEMU_CPU_STR" \
        chroot "$ROOT" /usr/sbin/sshd -f "$BOARD_ETC/sshd_config-$port" \
        -E "/var/log/rvvkit-board-sshd-$port.log" \
        || die "sshd failed to start (see $ROOT/var/log/rvvkit-board-sshd-$port.log)"
    local i
    for i in $(seq 1 300); do  # sshd under QEMU takes a few seconds to listen
        if python3 -c "import socket, sys; s = socket.create_connection(('127.0.0.1', $port), 1)
sys.exit(0 if s.recv(8).startswith(b'SSH-') else 1)" 2>/dev/null; then
            say "board up: ssh -p $port root@127.0.0.1 (host key $etc/host_ed25519-$port.pub)"
            return 0
        fi
        sleep 0.1
    done
    die "sshd did not answer on 127.0.0.1:$port (see $ROOT/var/log/rvvkit-board-sshd-$port.log)"
}

cmd_stop_port() {
    local f pid
    f=$(pidfile "$1")
    [ -f "$f" ] || return 0
    pid=$(cat "$f" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        say "stopping the board's sshd on port $1 (pid $pid)"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$f" "$ROOT$BOARD_ETC"/*-"$1" "$ROOT$BOARD_ETC"/*-"$1".pub  # its config and keys
}

cmd_stop_all() {
    local p
    for p in $(running_ports); do cmd_stop_port "$p"; done
}

cmd_stop() {
    need_root
    [ -d "$ROOT" ] || return 0
    mkdir -p "$CACHE"
    exec 9>"$CACHE/.lock"
    flock 9
    if [ -n "${1:-}" ]; then cmd_stop_port "$1"; else cmd_stop_all; fi
    # Unmount only when no other server still runs in the root (parallel test workers).
    if [ -z "$(running_ports)" ]; then unmount_under "$ROOT"; fi
}

case "${1:-}" in
    build) cmd_build ;;
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    path) echo "$ROOT" ;;
    *) die "usage: debian_board.sh build | start PORT [KEYS_FILE] | stop [PORT] | path" ;;
esac
