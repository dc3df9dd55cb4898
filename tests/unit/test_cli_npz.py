"""The CLI's .npz files (rvvkit/cli/npz.py): any tensor name round-trips, no name becomes a
member path, a bad file is one InputError, a failed write leaves nothing behind."""
from __future__ import annotations

import zipfile

import numpy as np
import pytest

from rvvkit.cli.npz import load_npz, member_name, printable, save_npz, tensor_name
from rvvkit.errors import InputError

AWKWARD = {"file": np.arange(3), "allow_pickle": np.ones((2, 2), np.float32),
           "../../x": np.zeros(1), "a/b\x1b[31m": np.array([True]), "..": np.zeros(2),
           "%41": np.zeros(1, np.int64), "é": np.zeros(1), "/model/Add_output_0": np.ones(4)}


def test_awkward_names_round_trip(tmp_path):
    path = tmp_path / "o.npz"
    save_npz(str(path), AWKWARD)
    back = load_npz(str(path))
    assert list(back) == list(AWKWARD)
    for k, v in AWKWARD.items():
        assert back[k].dtype == v.dtype and np.array_equal(back[k], v)
    for member in zipfile.ZipFile(path).namelist():
        assert "/" not in member and "\\" not in member and not member.startswith(".")


def test_numpy_savez_files_still_load(tmp_path):
    """Inputs written by users with np.savez (unescaped names, '/' included) load as named."""
    path = tmp_path / "in.npz"
    np.savez(path, **{"x": np.ones(2), "/model/input": np.zeros(3)})
    assert sorted(load_npz(str(path))) == ["/model/input", "x"]


@pytest.mark.parametrize("name", ["..", ".", "a%b", "\x00", "\\x", "日本"])
def test_member_name_inverts(name):
    assert tensor_name(member_name(name)) == name
    assert member_name(name) not in (".", "..")


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
