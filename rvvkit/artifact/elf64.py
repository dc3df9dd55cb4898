"""ELF64 container bytes: the section layout and the writer of an artifact file. Only what a
non-executable, non-linkable file of data sections needs: an ELF header, PROGBITS sections,
a section-name string table and the section header table (e_machine EM_NONE, ET_REL)."""
from __future__ import annotations

import struct
from typing import Callable, Dict, List, Tuple

EHDR = struct.Struct("<4sBBBBB7sHHIQQQIHHHHHH")
SHDR = struct.Struct("<IIQQQQIIQQ")
_ET_REL, _EM_NONE, _SHT_PROGBITS, _SHT_STRTAB = 1, 0, 1, 3


def strtab(names: List[str]) -> Tuple[bytes, Dict[str, int]]:
    blob, offsets = b"\0", {}
    for name in names:
        offsets[name] = len(blob)
        blob += name.encode("ascii") + b"\0"
    return blob, offsets


def layout(sections: List[Tuple[str, memoryview, int]], shstrtab: str):
    """(name, name offset, file offset, payload, align) per section, .shstrtab last; and e_shoff."""
    table, name_off = strtab([n for n, _, _ in sections] + [shstrtab])
    entries, pos = [], EHDR.size
    for name, payload, align in sections + [(shstrtab, memoryview(table), 1)]:
        pos = -(-pos // align) * align
        entries.append((name, name_off[name], pos, payload, align))
        pos += len(payload)
    return entries, -(-pos // 8) * 8


def emit(write: Callable, entries, shoff: int, shstrtab: str) -> None:
    """Writes section by section so that big payloads are never joined in memory."""
    write(EHDR.pack(b"\x7fELF", 2, 1, 1, 0, 0, b"\0" * 7, _ET_REL, _EM_NONE, 1, 0, 0, shoff, 0,
                    EHDR.size, 0, 0, SHDR.size, len(entries) + 1, len(entries)))
    pos = EHDR.size
    for _, _, offset, payload, _ in entries:
        write(b"\0" * (offset - pos))
        write(payload)
        pos = offset + len(payload)
    write(b"\0" * (shoff - pos + SHDR.size))  # padding, then the null section header
    for name, name_off, offset, payload, align in entries:
        kind = _SHT_STRTAB if name == shstrtab else _SHT_PROGBITS
        write(SHDR.pack(name_off, kind, 0, 0, offset, len(payload), 0, 0, align, 0))
