"""Reading and writing the CLI's .npz files with any tensor name.

np.savez(path, **arrays) takes tensor names as keyword arguments, so names such as `file` or
`allow_pickle` collide with its own parameters, and a name like `../../x` becomes a member path.
Here each array is written as its own member through np.lib.format, under a name escaped so it
is never a path; `np.load` gives the escaped name back, and `load_npz` undoes the escape.
Writes are atomic and read back before success is reported."""
from __future__ import annotations

import os
import zipfile
from typing import Dict, Mapping

import numpy as np

from ..errors import InputError

# characters kept as they are in member names; everything else is %XX (UTF-8 bytes)
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:+,=@")


def member_name(name: str) -> str:
    """The zip member stem of tensor `name`: '/', '\\', '%', control and non-ASCII characters
    and a leading '.' percent-escaped, so no name is a path or a hidden file."""
    out = "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8"))
                  for c in name)
    return "%2E" + out[1:] if out.startswith(".") else out


def tensor_name(member: str) -> str:
    """Inverse of member_name."""
    raw, i = bytearray(), 0
    while i < len(member):
        if member[i] == "%" and _is_hex(member[i + 1:i + 3]):
            raw.append(int(member[i + 1:i + 3], 16))
            i += 3
        else:
            raw += member[i].encode("utf-8")
            i += 1
    return raw.decode("utf-8", errors="replace")


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def printable(name: str) -> str:
    """A tensor name safe to print on a terminal (control characters escaped)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def save_npz(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Write `arrays` to `path` atomically; raises InputError (the file untouched) on failure."""
    tmp = f"{path}.{os.getpid()}.tmp.npz"
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, arr in arrays.items():
                with zf.open(member_name(name) + ".npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, np.asarray(arr), allow_pickle=False)
        back = load_npz(tmp)
        if list(back) != list(arrays) or any(back[k].shape != np.shape(arrays[k])
                                             for k in arrays):
            raise InputError(f"cannot write {path}: the file read back differs")
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_npz(path: str) -> Dict[str, np.ndarray]:
    """The arrays of an .npz keyed by tensor name; InputError for anything that is not one."""
    def fail(why: str) -> InputError:
        return InputError(f"cannot read inputs {path}: {why}")
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise fail("the file is empty")
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise fail("not an .npz archive (a single .npy array?); write one with numpy.savez")
        with data:
            return {tensor_name(k): data[k] for k in data.files}
    except MemoryError:
        raise fail("an array is too large for memory") from None
    except EOFError:
        raise fail("the file is empty") from None
    except (OSError, ValueError, zipfile.BadZipFile, KeyError) as exc:
        raise fail(str(exc) or type(exc).__name__) from None
