"""The artifact container: round trip, ELF tool compatibility, integrity checks, atomic save."""
import json
import os
import random
import shutil
import struct
import subprocess

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from rvvkit.artifact import container as A
from rvvkit.artifact.container import Artifact, ArtifactError, read_section

C_SRC = "/* odd length so that the weights need padding */\nvoid k(float *x) { x[0] = 1; }\n"
CU_SRC = "__global__ void k(float *x) { x[0] = 1; }\n"
SO = b"\x7fELF fake shared object \x00\x01\x02"
META = {"inputs": [{"name": "x", "shape": [1, 3], "dtype": "float32"}], "plan": ["k"]}


def make(**kw) -> Artifact:
    args = dict(meta=META, c_source=C_SRC, weights=np.arange(37, dtype=np.float32),
                cu_source=CU_SRC, extra={".rvvkit.so.riscv64-linux-gnu": SO})
    args.update(kw)
    return Artifact(**args)


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "model.rvv"
    make().save(path)
    return path


def craft(meta, payloads, *, check=None) -> bytes:
    """A container built by hand from the module's own layout code, for malformed contents."""
    sections = [(n, memoryview(p), 64) for n, p in payloads.items()]
    meta_raw = meta if isinstance(meta, bytes) else A._dump_json(meta)
    if meta is not None:
        sections.insert(0, (A.META, memoryview(meta_raw), 1))
    strtab, _ = A._strtab([n for n, _, _ in sections] + [A.CHECK, A.SHSTRTAB])
    check = check or {"format": "rvvkit", "format_version": A.FORMAT_VERSION,
                      "meta_sha256": A._sha(meta_raw or b""), "shstrtab_sha256": A._sha(strtab)}
    sections.append((A.CHECK, memoryview(json.dumps(check).encode()), 1))
    out = []
    A._emit(out.append, *A._layout(sections))
    return b"".join(bytes(x) for x in out)


def good_meta(payloads):
    return dict(format="rvvkit", format_version=1,
                sections={n: {"size": len(p), "sha256": A._sha(p)} for n, p in payloads.items()})


def flip(data: bytes, pos: int, mask: int = 0xFF) -> bytes:
    b = bytearray(data)
    b[pos] ^= mask
    return bytes(b)


# -- round trip -------------------------------------------------------------------------------

def test_round_trip_all_sections(saved):
    art = Artifact.load(saved)
    assert art.c_source == C_SRC and art.cu_source == CU_SRC
    assert art.extra == {".rvvkit.so.riscv64-linux-gnu": SO}
    np.testing.assert_array_equal(art.weights_array(), np.arange(37, dtype=np.float32))
    assert bytes(art.weights) == np.arange(37, dtype=np.float32).tobytes()
    assert {k: v for k, v in art.meta.items() if k not in ("format", "format_version",
                                                            "sections")} == META
    assert art.meta["format"] == A.MAGIC_KEY and art.meta["format_version"] == A.FORMAT_VERSION
    assert set(art.meta["sections"]) == {".rvvkit.c", ".rvvkit.cu", ".rvvkit.weights",
                                         ".rvvkit.so.riscv64-linux-gnu"}
    # Loading and saving again reproduces the file byte for byte.
    assert art.to_bytes() == saved.read_bytes() == make().to_bytes()


def test_round_trip_minimal_and_from_bytes():
    art = Artifact.from_bytes(Artifact({}, "", b"").to_bytes())
    assert art.c_source == "" and art.cu_source is None and art.extra == {}
    assert bytes(art.weights) == b"" and art.weights_array().size == 0


def test_weights_of_any_dtype_are_stored_raw():
    w = np.arange(12, dtype=np.uint8).reshape(3, 4)[:, ::2]  # non-contiguous on purpose
    art = Artifact.from_bytes(make(weights=w).to_bytes())
    assert bytes(art.weights) == np.ascontiguousarray(w).tobytes()


def test_caller_meta_is_not_mutated():
    meta = {"a": [1, 2]}
    Artifact(meta, "", b"").to_bytes()
    assert meta == {"a": [1, 2]}


def test_weights_array_is_a_view_not_a_copy(saved):
    arr = Artifact.load(saved).weights_array()
    assert arr.dtype == np.float32 and not arr.flags.owndata and arr.flags.aligned
    assert not arr.flags.writeable
    assert arr.ctypes.data % 64 == 0  # load() aligns its buffer like the file aligns the section


def test_sections_report_matches_file(saved):
    stored = Artifact.load(saved).sections()
    assert stored == make().sections()
    with open(saved, "rb") as f:
        elf = ELFFile(f)
        for s in stored:
            sec = elf.get_section_by_name(s["name"])
            assert (sec["sh_offset"], sec["sh_size"]) == (s["offset"], s["size"])
            assert A._sha(sec.data()) == s["sha256"]


def test_read_section_verifies_only_what_it_reads(saved):
    assert read_section(saved, ".rvvkit.c").decode() == C_SRC
    assert read_section(saved, ".rvvkit.so.riscv64-linux-gnu") == SO
    info = {s["name"]: s for s in Artifact.load(saved).sections()}[".rvvkit.weights"]
    saved.write_bytes(flip(saved.read_bytes(), info["offset"] + 3))
    assert read_section(saved, ".rvvkit.c").decode() == C_SRC
    with pytest.raises(ArtifactError, match=r"\.rvvkit\.weights is corrupt"):
        read_section(saved, ".rvvkit.weights")
    with pytest.raises(ArtifactError, match="missing required section .rvvkit.nope"):
        read_section(saved, ".rvvkit.nope")


# -- ELF compatibility ------------------------------------------------------------------------

def test_weights_are_64_byte_aligned(saved):
    with open(saved, "rb") as f:
        sec = ELFFile(f).get_section_by_name(".rvvkit.weights")
        assert sec["sh_offset"] % 64 == 0 and sec["sh_addralign"] == 64
        assert sec.data() == np.arange(37, dtype=np.float32).tobytes()


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf not installed")
def test_readelf_lists_sections(saved):
    res = subprocess.run(["readelf", "-S", "-W", str(saved)], capture_output=True, text=True)
    assert res.returncode == 0 and res.stderr == ""
    for name in (".rvvkit.meta", ".rvvkit.check", ".rvvkit.c", ".rvvkit.cu", ".rvvkit.weights",
                 ".rvvkit.so.riscv64-linux-gnu", ".shstrtab"):
        assert name in res.stdout


@pytest.mark.skipif(shutil.which("objcopy") is None, reason="objcopy not installed")
def test_objcopy_dumps_c_source(saved, tmp_path):
    # e_machine is EM_NONE, which GNU objcopy only accepts with an explicit input format.
    out = tmp_path / "out.c"
    subprocess.run(["objcopy", "-I", "elf64-little", "--dump-section", f".rvvkit.c={out}",
                    str(saved)], check=True, capture_output=True)
    assert out.read_text() == C_SRC


@pytest.mark.skipif(shutil.which("llvm-objcopy") is None, reason="llvm-objcopy not installed")
def test_llvm_objcopy_dumps_c_source(saved, tmp_path):
    out = tmp_path / "out.c"
    subprocess.run(["llvm-objcopy", "--dump-section", f".rvvkit.c={out}", str(saved)],
                   check=True, capture_output=True)
    assert out.read_text() == C_SRC


# -- integrity --------------------------------------------------------------------------------

SECTIONS = [".rvvkit.meta", ".rvvkit.check", ".rvvkit.c", ".rvvkit.cu", ".rvvkit.weights",
            ".rvvkit.so.riscv64-linux-gnu", ".shstrtab"]


@pytest.mark.parametrize("name", SECTIONS)
def test_corrupt_byte_names_its_section(name):
    data = make().to_bytes()
    info = {s["name"]: s for s in make().sections()}[name]
    with pytest.raises(ArtifactError) as e:
        Artifact.from_bytes(flip(data, info["offset"] + info["size"] // 2))
    assert name in str(e.value)


def test_every_payload_byte_is_covered():
    data = make().to_bytes()
    for s in make().sections():
        for pos in range(s["offset"], s["offset"] + s["size"]):
            with pytest.raises(ArtifactError) as e:
                Artifact.from_bytes(flip(data, pos, 0x01))  # one bit: JSON mostly stays valid
            # A byte of the check's own name in .shstrtab hides the check: then it is named.
            names = {s["name"], ".rvvkit.check"} if s["name"] == ".shstrtab" else {s["name"]}
            assert any(n in str(e.value) for n in names), (s["name"], pos, str(e.value))


def test_corrupted_headers_never_leak_foreign_exceptions():
    data = make().to_bytes()
    shoff = struct.unpack_from("<Q", data, 40)[0]
    header_bytes = list(range(64)) + list(range(shoff, len(data)))
    rng = random.Random(1234)
    for _ in range(1000):
        b = bytearray(data)
        for pos in rng.sample(header_bytes, rng.randint(1, 3)):
            b[pos] = rng.randrange(256)
        try:
            Artifact.from_bytes(bytes(b))
        except ArtifactError:
            pass


@pytest.mark.parametrize("cut", [1, 4, 10, 63, 64, 200, -200, -65, -1])
def test_truncated_file(cut):
    data = make().to_bytes()
    with pytest.raises(ArtifactError, match="truncated|not an rvvkit artifact"):
        Artifact.from_bytes(data[:cut])


def test_truncated_file_message(saved):
    saved.write_bytes(saved.read_bytes()[:-10])
    with pytest.raises(ArtifactError, match=r"^truncated: .*model\.rvv"):
        Artifact.load(saved)


@pytest.mark.parametrize("data", [b"", b"\x00", random.Random(7).randbytes(4096),
                                  b"\x7fELF" + random.Random(8).randbytes(4000),
                                  b"PK\x03\x04" + b"\x00" * 100],
                         ids=["empty", "nul", "noise", "elf_magic_then_noise", "zip"])
def test_not_an_artifact(data):
    with pytest.raises(ArtifactError, match="not an rvvkit artifact|truncated"):
        Artifact.from_bytes(data)


def test_empty_file(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(ArtifactError, match="not an rvvkit artifact"):
        Artifact.load(tmp_path / "empty")


def test_elf32_and_big_endian_refused():
    data = make().to_bytes()
    for pos, value in ((4, 1), (5, 2)):
        b = bytearray(data)
        b[pos] = value
        with pytest.raises(ArtifactError, match="not ELF64 little-endian"):
            Artifact.from_bytes(bytes(b))


def test_foreign_elf_refused():
    exe = shutil.which("ls") or shutil.which("sh")
    with pytest.raises(ArtifactError, match=r"not an rvvkit artifact: .* has no \.rvvkit\.check"):
        Artifact.load(exe)


@pytest.mark.parametrize("version, msg", [(2, "newer than this rvvkit supports"),
                                          (0, "not supported")])
def test_wrong_format_version(monkeypatch, version, msg):
    monkeypatch.setattr(A, "FORMAT_VERSION", version)
    data = make().to_bytes()
    monkeypatch.undo()
    with pytest.raises(ArtifactError, match=msg):
        Artifact.from_bytes(data)


def test_bad_json_in_meta():
    with pytest.raises(ArtifactError, match=r"section \.rvvkit\.meta is corrupt: invalid JSON") \
            as e:
        Artifact.from_bytes(craft(b"{not json", {".rvvkit.c": b"", ".rvvkit.weights": b""}))
    assert e.value.section == ".rvvkit.meta"


def test_meta_not_an_object():
    with pytest.raises(ArtifactError, match="not an object"):
        Artifact.from_bytes(craft(b"[1, 2]", {}))


@pytest.mark.parametrize("missing", [".rvvkit.c", ".rvvkit.weights"])
def test_missing_required_section(missing):
    payloads = {".rvvkit.c": b"int x;", ".rvvkit.weights": b"\0" * 8}
    meta = good_meta(payloads)
    del payloads[missing]
    with pytest.raises(ArtifactError, match=f"missing required section {missing}") as e:
        Artifact.from_bytes(craft(meta, payloads))
    assert e.value.section == missing


def test_deeply_nested_meta_is_one_error():
    """json recurses per level: 10^5 nested arrays must be an ArtifactError, not a
    RecursionError traceback."""
    payloads = {".rvvkit.c": b"", ".rvvkit.weights": b""}
    text = A._dump_json(good_meta(payloads))[:-1] + b', "x": ' + b"[" * 100000 + b"]" * 100000 \
        + b"}"
    with pytest.raises(ArtifactError, match="nested too deeply"):
        Artifact.from_bytes(craft(text, payloads))


def test_missing_meta():
    with pytest.raises(ArtifactError, match=r"missing required section \.rvvkit\.meta"):
        Artifact.from_bytes(craft(None, {".rvvkit.c": b"", ".rvvkit.weights": b""}))


def test_section_without_checksum_refused():
    payloads = {".rvvkit.c": b"", ".rvvkit.weights": b""}
    meta = good_meta(payloads)
    payloads[".rvvkit.so.x86_64-linux-gnu"] = b"sneaky"
    with pytest.raises(ArtifactError, match=r"'\.rvvkit\.so\.x86_64-linux-gnu' has no checksum"):
        Artifact.from_bytes(craft(meta, payloads))


def test_crafted_container_with_good_chain_loads():
    payloads = {".rvvkit.c": b"int x;", ".rvvkit.weights": b"\0" * 8}
    assert Artifact.from_bytes(craft(good_meta(payloads), payloads)).c_source == "int x;"


def test_writer_rejects_bad_input():
    with pytest.raises(ArtifactError, match="strict JSON"):
        Artifact({"x": float("nan")}, "", b"").to_bytes()
    with pytest.raises(ArtifactError, match="invalid extra section name"):
        Artifact({}, "", b"", extra={".rvvkit.c": b""}).to_bytes()
    with pytest.raises(ArtifactError, match="not a whole number"):
        Artifact({}, "", b"abc").weights_array()


# -- atomic save ------------------------------------------------------------------------------

def test_save_leaves_no_temporary_files(tmp_path):
    make().save(tmp_path / "a.rvv")
    make(c_source="changed").save(tmp_path / "a.rvv")
    assert os.listdir(tmp_path) == ["a.rvv"]
    assert Artifact.load(tmp_path / "a.rvv").c_source == "changed"


@pytest.mark.parametrize("where", ["write", "fsync", "replace"])
def test_failed_save_keeps_previous_file(tmp_path, monkeypatch, where):
    path = tmp_path / "a.rvv"
    make().save(path)
    before = path.read_bytes()

    def disk_full(*_a, **_k):
        raise OSError(28, "No space left on device")

    if where == "write":
        real_emit = A._emit

        def emit_then_fail(write, entries, shoff):
            written = []

            def failing_write(chunk):
                if sum(written) > 300:  # part of the file is already out when it fails
                    disk_full()
                written.append(len(chunk))
                return write(chunk)
            real_emit(failing_write, entries, shoff)

        monkeypatch.setattr(A, "_emit", emit_then_fail)
    else:
        monkeypatch.setattr(A.os, where, disk_full)
    with pytest.raises(OSError, match="No space left"):
        make(c_source="new").save(path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["a.rvv"]
    assert path.read_bytes() == before
    assert Artifact.load(path).c_source == C_SRC
