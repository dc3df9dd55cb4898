"""The CLI's .npz files (rvvkit/cli/npz.py): names are keys verbatim for numpy, any tensor name
round-trips through rvvkit, only names unsafe as archive paths are escaped (and said so), a bad
file is one InputError, a failed write leaves nothing behind."""
from __future__ import annotations

import zipfile

import numpy as np
import pytest

from rvvkit.cli.npz import archive_key, is_unsafe, load_npz, printable, save_npz
from rvvkit.errors import InputError

# PyTorch legacy / dynamo exporter names, ONNX zoo names, np.savez's own keywords, odd text
SAFE = {"/layer1/conv/Conv_output_0": np.ones(4), "linear_1": np.arange(3),
        "gpu_0/softmax_1": np.zeros((1, 2), np.float32), "file": np.arange(3),
        "allow_pickle": np.ones((2, 2), np.float32), "%41": np.zeros(1, np.int64),
        "é/日本": np.zeros(1), "a..b/.hidden": np.array([True])}
UNSAFE = {"../../x": np.zeros(1), "..": np.zeros(2), ".": np.ones(1), "a/./b": np.ones(2),
          "a\\b": np.ones(3), "nul\x00": np.ones(1), "esc\x1b[31m": np.array([True]),
          "del\x7f": np.ones(1)}


def _save(path, arrays):
    said = []
    save_npz(str(path), arrays, warn=said.append)
    return said


def test_safe_names_are_plain_numpy_keys(tmp_path):
    path = tmp_path / "o.npz"
    assert _save(path, SAFE) == []
    with np.load(path) as plain:
        assert plain.files == list(SAFE)
        for k, v in SAFE.items():
            assert plain[k].dtype == v.dtype and np.array_equal(plain[k], v)
    assert list(load_npz(str(path))) == list(SAFE)


def test_unsafe_names_are_escaped_said_and_read_back(tmp_path):
    path = tmp_path / "o.npz"
    arrays = {**SAFE, **UNSAFE}
    said = _save(path, arrays)
    assert len(said) == len(UNSAFE)
    for name, line in zip(UNSAFE, said):
        assert printable(name) in line and repr(archive_key(name)) in line
    back = load_npz(str(path))
    assert list(back) == list(arrays)
    for k, v in arrays.items():
        assert back[k].dtype == v.dtype and np.array_equal(back[k], v)
    for member in zipfile.ZipFile(path).namelist():
        parts = member.split("/")
        assert "\\" not in member and "." not in parts and ".." not in parts
        assert all(ord(c) >= 0x20 and c != "\x7f" for c in member)


@pytest.mark.parametrize("name", list(UNSAFE))
def test_unsafe_is_unsafe_and_its_key_is_not(name):
    assert is_unsafe(name) and not is_unsafe(archive_key(name))


@pytest.mark.parametrize("name", list(SAFE))
def test_safe_names_are_their_own_keys(name):
    assert not is_unsafe(name) and archive_key(name) == name


def test_an_escape_that_another_name_holds_gets_a_unique_key(tmp_path):
    """'a\\b' escapes to 'a%5Cb', which is also a (safe) name of its own: both survive."""
    path = tmp_path / "o.npz"
    arrays = {"a%5Cb": np.zeros(1), "a\\b": np.ones(1)}
    said = _save(path, arrays)
    assert len(said) == 1 and "a%5Cb~2" in said[0]
    with np.load(path) as plain:
        assert sorted(plain.files) == ["a%5Cb", "a%5Cb~2"] and plain["a%5Cb"][0] == 0
    back = load_npz(str(path))
    assert back["a%5Cb"][0] == 0 and back["a\\b"][0] == 1


def test_numpy_savez_files_load_verbatim(tmp_path):
    """Inputs written by users with np.savez load under the names numpy gives them, including
    names that look like rvvkit's escapes (only rvvkit's own archives record escapes)."""
    path = tmp_path / "in.npz"
    names = {"x": np.ones(2), "/model/input": np.zeros(3), "a%5Cb": np.ones(1),
             "w\\in": np.ones(1)}
    np.savez(path, **names)
    assert sorted(load_npz(str(path))) == sorted(names)


def test_empty_name_is_refused(tmp_path):
    with pytest.raises(InputError, match="empty name"):
        save_npz(str(tmp_path / "o.npz"), {"": np.ones(1)})
    assert list(tmp_path.iterdir()) == []


def test_printable_escapes_control_characters():
    assert printable("a\x1b[31mb\n") == "a\\x1b[31mb\\n"


@pytest.mark.parametrize("content, why", [
    (b"", "empty"), (b"PK\x03\x04garbage", "zip"), (b"\x93NUMPY", None)])
def test_bad_input_files_are_one_error(tmp_path, content, why):
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    with pytest.raises(InputError, match="cannot read inputs") as exc:
        load_npz(str(path))
    assert why is None or why in str(exc.value)


def test_a_single_npy_named_npz(tmp_path):
    path = tmp_path / "a.npz"
    with open(path, "wb") as f:
        np.save(f, np.zeros(3))
    with pytest.raises(InputError, match="not an .npz archive"):
        load_npz(str(path))


def test_an_oversized_member_is_one_error(tmp_path):
    """A member whose header claims 10^12 elements: an error, not a MemoryError traceback."""
    path = tmp_path / "big.npz"
    with zipfile.ZipFile(path, "w") as zf:
        with zf.open("x.npy", "w") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": "<f4", "fortran_order": False, "shape": (10 ** 12,)})
    with pytest.raises(InputError, match="cannot read inputs"):
        load_npz(str(path))


def test_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "missing_dir" / "o.npz"
    with pytest.raises(InputError, match="cannot write"):
        save_npz(str(target), {"y": np.ones(2)})
    assert not target.exists() and list(tmp_path.iterdir()) == []
