"""Target and compiler facts, read from toolchain/targets/*.toml (data, not code): triples,
candidate compilers in order, flags per compiler family, intrinsic API levels, the QEMU binary,
sysroot and -cpu template, VLENs; and the board presets of toolchain/boards/*.toml.

    rv = riscv()                  # toolchain/targets/riscv64-linux-gnu.toml
    rv.triple, rv.vlens, rv.cpu_string(512), rv.family_flags("clang").arch
    host().compilers["native"]    # x86_64-linux-gnu.toml, the facts of whatever host this is
    nvcc().flags["base"]
    board_preset("k1")["vlen"]
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from ..errors import RvvkitError
from ..resources import load_toml, toolchain_dir

RISCV = "riscv64-linux-gnu"
HOST = "x86_64-linux-gnu"
NVCC = "nvcc"


@dataclass(frozen=True)
class FamilyFlags:
    """What the JIT adds for one compiler family (gcc, clang, zig) building for a target."""
    arch: Tuple[str, ...] = ()         # e.g. -march=rv64gcv -mabi=lp64d
    names_target: bool = False         # a cross compiler by nature: needs --target=<triple>
    cross_link: Tuple[str, ...] = ()   # when it runs on another architecture (-fuse-ld=lld)


@dataclass(frozen=True)
class Target:
    name: str                          # the file's stem
    path: str                          # the file, for messages
    data: Dict[str, Any]               # the whole document

    def get(self, *keys: str) -> Any:
        """A value by its key path; RvvkitError naming the file and key when it is missing."""
        value: Any = self.data
        for i, key in enumerate(keys):
            if not isinstance(value, dict) or key not in value:
                raise RvvkitError(f"{self.path}: missing key {'.'.join(keys[:i + 1])!r}; "
                                  "reinstall rvvkit or fix the file")
            value = value[key]
        return value

    @property
    def triple(self) -> str:
        return self.get("triple")

    @property
    def arch(self) -> str:
        return self.get("arch")

    @property
    def compilers(self) -> Dict[str, List[str]]:
        return self.get("compilers")

    @property
    def flags(self) -> Dict[str, Any]:
        return self.get("flags")

    def family_flags(self, family: str) -> FamilyFlags:
        """Flags for a compiler family; an unknown family is treated as gcc."""
        table = self.flags.get(family) or self.get("flags", "gcc")
        return FamilyFlags(arch=tuple(table.get("arch", ())),
                           names_target=bool(table.get("names_target", False)),
                           cross_link=tuple(table.get("cross_link", ())))

    # -- RVV targets ---------------------------------------------------------------------------

    @property
    def vlens(self) -> Tuple[int, ...]:
        return tuple(int(v) for v in self.get("rvv", "vlens"))

    @property
    def default_vlen(self) -> int:
        return int(self.get("rvv", "default_vlen"))

    @property
    def intrinsics(self) -> Dict[str, str]:
        """__riscv_v_intrinsic value -> the API it means."""
        return dict(self.get("intrinsics"))

    @property
    def qemu_binary(self) -> str:
        return self.get("qemu", "binary")

    @property
    def sysroot(self) -> str:
        return self.get("qemu", "sysroot")

    def cpu_string(self, vlen: int, tail_ones: bool = False) -> str:
        """QEMU's -cpu value for an RVV 1.0 CPU of `vlen` bits (tail_ones: agnostic elements
        become all ones, which exposes reads past vl and of masked-off lanes)."""
        cpu = self.get("qemu", "cpu").format(vlen=vlen)
        return cpu + (self.get("qemu", "cpu_tail_ones") if tail_ones else "")


def _load(name: str, folder: str) -> Dict[str, Any]:
    path = toolchain_dir() / folder / f"{name}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in (toolchain_dir() / folder).glob("*.toml"))
        raise RvvkitError(f"no {folder[:-1]} {name!r} in {path.parent} (known: "
                          f"{', '.join(known) or 'none'})")
    return load_toml(path)


@functools.lru_cache(maxsize=None)
def target(name: str) -> Target:
    """The facts of one target, by file stem: "riscv64-linux-gnu", "x86_64-linux-gnu", "nvcc"."""
    return Target(name, str(toolchain_dir() / "targets" / f"{name}.toml"),
                  _load(name, "targets"))


def riscv() -> Target:
    return target(RISCV)


def host() -> Target:
    """The host's facts. Named after x86_64, but generic (plain drivers, -march=native), so they
    serve any host architecture."""
    return target(HOST)


def nvcc() -> Target:
    return target(NVCC)


@functools.lru_cache(maxsize=None)
def board_preset(name: str) -> Dict[str, Any]:
    """A board preset (toolchain/boards/<name>.toml): name, cpu, cores, vlen, compilers, notes
    and the board options it seeds (`options`)."""
    return _load(name, "boards")


def board_presets() -> List[str]:
    return sorted(p.stem for p in (toolchain_dir() / "boards").glob("*.toml"))
