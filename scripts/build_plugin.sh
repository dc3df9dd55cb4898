#!/usr/bin/env bash
# Build the QEMU instruction-counting plugin (toolchain/qemu_plugin/qemu_icount.c) ahead of time,
# into rvvkit's cache (RVVKIT_CACHE_DIR, default ~/.cache/rvvkit), with the compilers and flags of
# [qemu.plugin] in toolchain/targets/riscv64-linux-gnu.toml, and print its path. rvvkit builds it
# on first use anyway; doing it here makes a broken host toolchain show up at set-up time.
# Called by scripts/setup.sh. Needs only a host C compiler (the plugin uses no glib). Without
# Python: make -C toolchain/qemu_plugin.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
path="$("$PY" -c 'from rvvkit.runtime.counting.icount import plugin_path; print(plugin_path())')"
printf 'build_plugin: QEMU counting plugin at %s\n' "$path" >&2
classes="$("$PY" -c 'from rvvkit.runtime.counting.icount import plugin_path
from rvvkit.runtime.counting.iclass import CLASSES_SOURCE
print(plugin_path(source_file=CLASSES_SOURCE))')"
printf 'build_plugin: QEMU class-counting plugin at %s\n' "$classes" >&2
printf '%s\n' "$path"
