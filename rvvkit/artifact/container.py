"""The artifact container: one ELF64 file holding meta JSON, C/CUDA source, weights and optional
precompiled shared objects. ELF so that readelf, objcopy and pyelftools read it on any host;
nothing in it is executed or linked, hence e_machine EM_NONE (GNU objcopy then needs
`-I elf64-little`; llvm-objcopy does not).

Integrity chain: .rvvkit.meta records size and sha256 of every other data section, and
.rvvkit.check records the sha256 of .rvvkit.meta and .shstrtab, so every payload byte is hashed.
Each of those also carries an rvk64 checksum (rvvkit/artifact/checksum.py) for the C runner, which
checks the same chain at about one instruction per byte. An optional .rvvkit.sig signs the
.rvvkit.check bytes (rvvkit/artifact/signing.py), so it stands outside the chain it signs."""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
from elftools.elf.elffile import ELFFile

from rvvkit.errors import ArtifactError

from . import elf64
from .meta import validate_meta
from .checksum import rvk64
from .elf64 import EHDR as _EHDR, SHDR as _SHDR, strtab as _strtab

FORMAT_VERSION = 1
MAGIC_KEY = "rvvkit"
META, CHECK, C_SRC, CU_SRC, WEIGHTS, SHSTRTAB = (
    ".rvvkit.meta", ".rvvkit.check", ".rvvkit.c", ".rvvkit.cu", ".rvvkit.weights", ".shstrtab")
TOKENIZER = ".rvvkit.tokenizer"  # a tokenizer.json the model came with (a GGUF file's vocabulary)
SIG = ".rvvkit.sig"  # signs .rvvkit.check, so it cannot be listed in the chain itself
_UNLISTED = (META, CHECK, SHSTRTAB, SIG)  # hashed through .rvvkit.check, not meta["sections"]
_CHECK_KEYS = {"format", "format_version", "meta_sha256", "shstrtab_sha256", "meta_rvk64",
               "shstrtab_rvk64"}
WEIGHTS_ALIGN = 64  # lets a C runner mmap the file and use the weights in place

def _sha(data) -> str:
    return hashlib.sha256(data).hexdigest()


def _dump_json(obj) -> bytes:
    # Sorted keys keep builds byte-reproducible; no NaN so that strict parsers (C runner) cope.
    return json.dumps(obj, sort_keys=True, indent=1, allow_nan=False).encode("utf-8")


def _byte_view(data) -> memoryview:
    if isinstance(data, np.ndarray):
        data = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    return memoryview(data).cast("B").toreadonly()


def _unique_keys(pairs) -> dict:
    """json's object hook refusing duplicate keys: json keeps the last, the C runner's reader
    refuses them (runtime_c/rvk_json.h), and both must read one document the same way."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate key {dup!r}")
    return obj


def _layout(sections: List[Tuple[str, memoryview, int]]):
    """(name, name offset, file offset, payload, align) per section, .shstrtab last; e_shoff."""
    return elf64.layout(sections, SHSTRTAB)


def _emit(write: Callable, entries, shoff: int) -> None:
    elf64.emit(write, entries, shoff, SHSTRTAB)


class _Reader:
    """Section table via pyelftools, then the check -> meta -> section hash chain."""

    def __init__(self, stream, size: int, fetch: Callable[[int, int], bytes], source: str):
        self.fetch, self.source, self.hashes = fetch, source, {}
        if size < 4 or bytes(fetch(0, 4)) != b"\x7fELF":
            raise ArtifactError(f"not an rvvkit artifact: {source} is not an ELF file")
        if size < _EHDR.size:
            raise ArtifactError(f"truncated: {source} is {size} bytes, smaller than an ELF header")
        hdr = _EHDR.unpack(bytes(fetch(0, _EHDR.size)))
        if hdr[1:3] != (2, 1):
            raise ArtifactError(f"not an rvvkit artifact: {source} is not ELF64 little-endian")
        end = hdr[12] + hdr[17] * hdr[18]  # e_shoff + e_shentsize * e_shnum
        if hdr[17] != _SHDR.size or hdr[18] == 0:
            raise ArtifactError(f"not an rvvkit artifact: {source} has no usable section table")
        if end > size:  # the table is written last, so this is what a cut-off file looks like
            raise ArtifactError(f"truncated: {source} is {size} bytes but its section table "
                                f"ends at byte {end}")
        self.table: Dict[str, Tuple[int, int]] = {}
        try:
            for sec in ELFFile(stream).iter_sections():
                if sec["sh_type"] == "SHT_NULL":
                    continue
                nobits = sec["sh_type"] == "SHT_NOBITS"  # occupies no file bytes (e.g. .bss)
                name, off, n = sec.name, sec["sh_offset"], 0 if nobits else sec["sh_size"]
                if name in self.table:
                    raise ArtifactError(f"{source}: duplicate section {name!r}", name)
                if off + n > size:
                    raise ArtifactError(f"section {name!r} is corrupt: it ends at byte {off + n}, "
                                        f"past the end of {source} ({size} bytes)", name)
                self.table[name] = (off, n)
        except ArtifactError:
            raise
        except Exception as e:  # pyelftools raises many types on bad input; none may leak
            raise ArtifactError(f"not an rvvkit artifact: {source}: unreadable ELF structure "
                                f"({type(e).__name__}: {e})") from None
        if CHECK not in self.table:
            raise ArtifactError(f"not an rvvkit artifact: {source} has no {CHECK} section "
                                f"(sections: {', '.join(sorted(self.table))})", CHECK)
        check = self._json(CHECK, self.raw(CHECK))
        self._check_format(check, CHECK)
        unknown = sorted(set(check) - _CHECK_KEYS)
        if unknown:  # e.g. a damaged key name: the hash it carried would go unchecked
            raise ArtifactError(f"section {CHECK} is corrupt: unknown key(s) {unknown}", CHECK)
        self._verify(SHSTRTAB, self.raw(SHSTRTAB), check.get("shstrtab_sha256"), CHECK,
                     check.get("shstrtab_rvk64", False))
        self.meta_raw = self.raw(META)
        self._verify(META, self.meta_raw, check.get("meta_sha256"), CHECK,
                     check.get("meta_rvk64", False))
        self.meta = self._json(META, self.meta_raw)
        self._check_format(self.meta, META)
        self.listed = self.meta.get("sections")
        if not isinstance(self.listed, dict):
            raise ArtifactError(f"section {META} has no 'sections' table", META)
        for name in self.table:
            if name not in self.listed and name not in _UNLISTED:
                raise ArtifactError(f"section {name!r} has no checksum in {META}", name)

    def _check_format(self, obj: dict, where: str) -> None:
        if obj.get("format") != MAGIC_KEY:
            raise ArtifactError(f"not an rvvkit artifact: {self.source}: {where} lacks "
                                f"format={MAGIC_KEY!r}", where)
        version = obj.get("format_version")
        if version != FORMAT_VERSION:
            newer = isinstance(version, int) and version > FORMAT_VERSION
            raise ArtifactError(
                f"{self.source}: artifact format version {version!r} (in {where}) is "
                + (f"newer than this rvvkit supports ({FORMAT_VERSION}); upgrade rvvkit" if newer
                   else f"not supported (expected {FORMAT_VERSION})"), where)

    def _json(self, name: str, raw) -> dict:
        try:
            obj = json.loads(bytes(raw).decode("utf-8"), object_pairs_hook=_unique_keys)
        except ValueError as e:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
            raise ArtifactError(f"section {name} is corrupt: invalid JSON ({e})", name) from None
        except RecursionError:  # json recurses per nesting level; the C reader stops at 64
            raise ArtifactError(f"section {name} is corrupt: JSON nested too deeply",
                                name) from None
        if not isinstance(obj, dict):
            raise ArtifactError(f"section {name} is corrupt: JSON is not an object", name)
        return obj

    def _verify(self, name: str, data, expected, listed_in: str, expected_rvk64=False) -> None:
        """sha256 always; rvk64 too where the writer recorded one (False: an artifact from
        before rvk64), so that the C runner's checksums are known good as well."""
        found = self.hashes[name] = _sha(data)
        if found != expected:
            raise ArtifactError(f"section {name} is corrupt: sha256 mismatch (expected {expected} "
                                f"from {listed_in}, found {found})", name)
        if expected_rvk64 is not False and rvk64(data) != expected_rvk64:
            raise ArtifactError(f"section {name} is corrupt: rvk64 checksum mismatch (expected "
                                f"{expected_rvk64!r} from {listed_in})", name)

    def raw(self, name: str):
        if name not in self.table:
            raise ArtifactError(f"{self.source}: missing required section {name} (present: "
                                f"{', '.join(sorted(self.table))})", name)
        off, n = self.table[name]
        return self.fetch(off, n)

    def section(self, name: str):
        """A section's payload, its size and sha256 checked against the chain."""
        if name in _UNLISTED:
            return self.meta_raw if name == META else self.raw(name)  # verified in __init__
        entry = self.listed.get(name)
        data = self.raw(name)
        if not isinstance(entry, dict) or len(data) != entry.get("size"):
            raise ArtifactError(f"section {name} is corrupt: size {len(data)} does not match "
                                f"{META}", name)
        self._verify(name, data, entry.get("sha256"), META, entry.get("rvk64", False))
        return data

    def text(self, name: str) -> str:
        try:
            return bytes(self.section(name)).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ArtifactError(f"section {name} is corrupt: not UTF-8 ({e})", name) from None


class Artifact:
    def __init__(self, meta: dict, c_source: str, weights, cu_source: Optional[str] = None,
                 extra: Optional[Dict[str, bytes]] = None):
        self.meta = dict(meta)
        self.c_source, self.cu_source = c_source, cu_source
        self.extra = dict(extra or {})
        self._weights = _byte_view(weights)
        # .rvvkit.sig's payload (rvvkit.artifact.signing writes and checks it); None: unsigned, and
        # then the file is byte for byte what it was before signing existed.
        self.signature: Optional[bytes] = None
        self.check_read: Optional[bytes] = None  # .rvvkit.check as loaded: what a signature signs
        self._stored: Optional[List[dict]] = None
        self._model_checked = False

    @property
    def weights(self) -> memoryview:
        return self._weights

    def weights_array(self) -> np.ndarray:
        """The weights as a flat float32 array sharing memory with the artifact (read-only)."""
        if len(self._weights) % 4:
            raise ArtifactError(f"weights are {len(self._weights)} bytes, not a whole number of "
                                "float32 values", WEIGHTS)
        arr = np.frombuffer(self._weights, dtype=np.float32)
        return arr if arr.flags.aligned else arr.copy()

    def _plan(self, signed: Optional[bool] = None):
        """The layout save() writes. `signed` (default: whether there is a signature) adds
        .rvvkit.sig, whose name alone changes .shstrtab and so the .rvvkit.check that
        rvvkit.artifact.signing signs: it asks for signed=True before the signature exists."""
        signed = self.signature is not None if signed is None else signed
        data = [(C_SRC, memoryview(self.c_source.encode("utf-8")), 1)]
        if self.cu_source is not None:
            data.append((CU_SRC, memoryview(self.cu_source.encode("utf-8")), 1))
        for name in sorted(self.extra):
            if (not name.startswith(".rvvkit.") or name in _UNLISTED + (C_SRC, CU_SRC, WEIGHTS)
                    or not name.isascii() or "\0" in name):
                raise ArtifactError(f"invalid extra section name {name!r} "
                                    "(expected .rvvkit.so.<target-triple>)", name)
            data.append((name, _byte_view(self.extra[name]), 64))
        data.append((WEIGHTS, self._weights, WEIGHTS_ALIGN))
        meta = dict(self.meta, format=MAGIC_KEY, format_version=FORMAT_VERSION,
                    sections={n: {"size": len(p), "sha256": _sha(p), "rvk64": rvk64(p)}
                              for n, p, _ in data})
        try:
            meta_raw = memoryview(_dump_json(meta))
        except (TypeError, ValueError) as e:
            raise ArtifactError(f"meta cannot be stored as strict JSON: {e}", META) from None
        data.insert(0, (META, meta_raw, 1))
        # .shstrtab depends on the names alone, so its hash can go into the check up front.
        tail = [SIG] if signed else []
        strtab, _ = _strtab([n for n, _, _ in data] + [CHECK] + tail + [SHSTRTAB])
        check = json.dumps({"format": MAGIC_KEY, "format_version": FORMAT_VERSION,
                            "meta_sha256": _sha(meta_raw), "shstrtab_sha256": _sha(strtab),
                            # what the C runner checks (runtime_c/rvk_artifact.h)
                            "meta_rvk64": rvk64(meta_raw), "shstrtab_rvk64": rvk64(strtab)},
                           sort_keys=True, separators=(",", ":")).encode("ascii")
        return _layout(data + [(CHECK, memoryview(check), 1)]
                       + [(SIG, memoryview(self.signature or b""), 1) for _ in tail])

    def check_section(self, signed: Optional[bool] = None) -> bytes:
        """The .rvvkit.check bytes save() would write (see _plan for `signed`)."""
        return bytes(next(p for n, _, _, p, _ in self._plan(signed)[0] if n == CHECK))

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        _emit(buf.write, *self._plan())
        return buf.getvalue()

    def save(self, path) -> None:
        """Atomic: readers see the old file or the complete new one, never a partial write."""
        path = os.fspath(path)
        entries, shoff = self._plan()  # fails before any file is touched on bad meta or names
        tmp = os.path.join(os.path.dirname(path) or ".",
                           f".{os.path.basename(path)}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies as usual
        try:
            with os.fdopen(fd, "wb") as f:
                _emit(f.write, entries, shoff)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @classmethod
    def from_bytes(cls, data, *, source: str = "<bytes>") -> "Artifact":
        data = data if isinstance(data, bytes) else bytes(data)
        return cls._read(io.BytesIO(data), memoryview(data), source)

    @classmethod
    def load(cls, path) -> "Artifact":
        try:
            f = open(path, "rb")
        except OSError as e:  # a wrong path is a one-line error, never a traceback
            raise ArtifactError(f"cannot read artifact {os.fspath(path)}: "
                                f"{e.strerror or e}") from None
        with f:
            size = os.fstat(f.fileno()).st_size
            # The one copy of the file, into a 64-byte aligned buffer so that the weights (64-byte
            # aligned in the file) are also aligned in memory for host-run vector kernels.
            buf = np.empty(size + WEIGHTS_ALIGN, dtype=np.uint8)
            start = -buf.ctypes.data % WEIGHTS_ALIGN
            view = memoryview(buf[start:start + size])
            got = f.readinto(view)
            if got != size:
                raise ArtifactError(f"truncated: {path} shrank from {size} to {got} bytes while "
                                    "being read")
            f.seek(0)
            return cls._read(f, view.toreadonly(), os.fspath(path))

    @classmethod
    def _read(cls, stream, view: memoryview, source: str) -> "Artifact":
        # pyelftools parses headers from `stream`; payloads are zero-copy slices of `view`.
        r = _Reader(stream, len(view), lambda off, n: view[off:off + n], source)
        extra = {n: bytes(r.section(n)) for n in sorted(r.table)
                 if n not in _UNLISTED + (C_SRC, CU_SRC, WEIGHTS)}
        cu = r.text(CU_SRC) if CU_SRC in r.table or CU_SRC in r.listed else None
        art = cls(r.meta, r.text(C_SRC), r.section(WEIGHTS), cu, extra)
        art.check_read = bytes(r.raw(CHECK))
        art.signature = bytes(r.raw(SIG)) if SIG in r.table else None
        art._stored = [{"name": n, "size": size, "offset": off,
                        "sha256": r.hashes.get(n) or _sha(r.fetch(off, size))}
                       for n, (off, size) in sorted(r.table.items(), key=lambda kv: kv[1][0])]
        return art

    def check_model(self) -> "Artifact":
        """Validates the meta as a model's (artifact_meta.validate_meta) before anything sizes
        buffers from it; the container itself accepts any JSON object. Returns self."""
        if not self._model_checked:
            validate_meta(self.meta, len(self._weights))
            self._model_checked = True
        return self

    def sections(self) -> List[dict]:
        """[{name, size, offset, sha256}] in file order, as stored (or as save() would store)."""
        if self._stored is not None:
            return [dict(s) for s in self._stored]
        return [{"name": n, "size": len(p), "offset": off, "sha256": _sha(p)}
                for n, _, off, p, _ in self._plan()[0]]


def read_section(path, name: str) -> bytes:
    """One verified section, reading only the headers, check, meta and that section's bytes."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size

        def fetch(off: int, n: int) -> bytes:
            f.seek(off)
            return f.read(n)

        return bytes(_Reader(f, size, fetch, os.fspath(path)).section(name))
