"""Where the instructions go: the counting plugin's block profile (blocks=PATH, see
toolchain/qemu_plugin/qemu_icount.c) attributed to the functions of the files QEMU mapped.

qemu-user on a 64-bit host maps the guest at its own addresses, so the plugin's copy of
/proc/self/maps gives each block's file and file offset; the file's ELF program headers turn
that offset into the address its symbol table uses. Generated kernels are static functions, so
the kernel library keeps them in .symtab (the JIT does not strip)."""
from __future__ import annotations

import bisect
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ...errors import RvvkitError

KEYS = ("insns", "vector_insns", "lmul_weighted_vector_ops")


class ElfFunctions:
    """The functions of one ELF file (pyelftools), by the address its symbol table uses."""

    def __init__(self, path: str):
        from elftools.elf.elffile import ELFFile
        with open(path, "rb") as f:
            elf = ELFFile(f)
            self.loads = [(seg["p_offset"], seg["p_filesz"], seg["p_vaddr"])
                          for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"]
            # .symtab has the static functions (the generated kernels); .dynsym where stripped
            table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
            funcs = {sym["st_value"]: (sym.name, sym["st_size"])
                     for sym in (table.iter_symbols() if table else ())
                     if sym["st_info"]["type"] == "STT_FUNC" and sym["st_value"]}
        self.starts = sorted(funcs)
        self.funcs = [funcs[a] for a in self.starts]

    def vaddr_of(self, file_offset: int) -> Optional[int]:
        for off, size, vaddr in self.loads:
            if off <= file_offset < off + size:
                return vaddr + file_offset - off
        return None

    def function_at(self, vaddr: int) -> Optional[str]:
        i = bisect.bisect_right(self.starts, vaddr) - 1
        if i < 0:
            return None
        name, size = self.funcs[i]
        return name if vaddr < self.starts[i] + max(size, 1) else None


def read_profile(path) -> Tuple[List[Tuple[int, int, int, str]], List[Tuple[int, ...]]]:
    """(mappings (start, end, file offset, path), blocks (vaddr, execs, insns, vector,
    weighted)) of a blocks=PATH file."""
    maps, blocks = [], []
    for line in Path(path).read_text().splitlines():
        if line.startswith("M "):
            m = re.match(r"M ([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ \d+\s+(/.*)$", line)
            if m:
                maps.append((int(m[1], 16), int(m[2], 16), int(m[3], 16), m[4]))
        elif line.startswith("B "):
            f = line.split()
            blocks.append((int(f[1], 16),) + tuple(int(x) for x in f[2:6]))
    if not maps and not blocks:
        raise RvvkitError(f"{path}: no block profile in it")
    return sorted(maps), blocks


def by_function(path) -> Dict[str, Dict[str, int]]:
    """Counts per function ("name" in a file with symbols, "file:?" for a block no symbol
    covers, "?" outside any file), summed over the profile's blocks."""
    maps, blocks = read_profile(path)
    starts = [m[0] for m in maps]
    elves: Dict[str, Optional[ElfFunctions]] = {}
    out: Dict[str, Dict[str, int]] = {}
    for vaddr, _, insns, vector, weighted in blocks:
        i = bisect.bisect_right(starts, vaddr) - 1
        label = "?"
        if i >= 0 and vaddr < maps[i][1]:
            start, _, offset, file = maps[i]
            if file not in elves:
                try:
                    elves[file] = ElfFunctions(file)
                except Exception:   # noqa: BLE001 - pyelftools raises many types; not ours
                    elves[file] = None
            elf = elves[file]
            where = elf.vaddr_of(vaddr - start + offset) if elf else None
            name = elf.function_at(where) if where is not None else None
            label = name or f"{Path(file).name}:?"
        row = out.setdefault(label, dict.fromkeys(KEYS, 0))
        for k, v in zip(KEYS, (insns, vector, weighted)):
            row[k] += v
    return out


def difference(hi: Dict[str, Dict[str, int]], lo: Dict[str, Dict[str, int]]
               ) -> Dict[str, Dict[str, int]]:
    """hi - lo per function (the work of the inferences one run did more), zero rows dropped."""
    out = {}
    for name, row in hi.items():
        base = lo.get(name, {})
        d = {k: row[k] - base.get(k, 0) for k in KEYS}
        if any(d.values()):
            out[name] = d
    return out


def family(name: str) -> str:
    """A function's kernel family: its name without shapes, hashes and LMUL variant."""
    name = re.sub(r"_rows\d+(?=_|$)", "", name)       # a pair kernel's row-group function
    name = re.sub(r"_lmul\d(?=_|$)", "", name)
    name = re.sub(r"_[0-9a-f]{8}(?=_|$)", "", name)
    return re.sub(r"\d+", "#", name)
