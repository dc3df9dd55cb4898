"""Reading and writing the CLI's .npz files under the graph's own tensor names.

Each array is an archive member `<name>.npy`, so `numpy.load(path)[name]` gives it back under the
graph's name verbatim, `/` included (PyTorch's `/layer1/Conv_output_0`, the ONNX zoo's
`gpu_0/softmax_1`): numpy writes and reads such names the same way. Members are written one by
one through np.lib.format rather than np.savez(**arrays), whose own keyword parameters (`file`,
`allow_pickle`) would collide with tensors of those names.

Only a name that is unsafe as a path when someone unzips the archive is stored under another key:
one with a `.` or `..` component, a backslash, or a NUL/control character. Those characters (and
whole `.`/`..` components) are percent-escaped, one line on stderr names the original and the key,
and `load_npz` reads such a key back as the name it escapes, so rvvkit's own outputs feed back in
as inputs. Which keys are escapes is recorded in the archive's zip comment (numpy ignores it),
so a file from np.savez is always read verbatim and no name is ever mistaken for an escape.
Writes are atomic and read back before success is reported."""
from __future__ import annotations

import json
import os
import sys
import zipfile
from typing import Callable, Dict, Iterable, Mapping

import numpy as np

from ..errors import InputError

_COMPONENTS_UNSAFE = frozenset({".", ".."})
_COMMENT_TAG = b"rvvkit-npz-escaped-keys:"


def _unsafe_char(c: str) -> bool:
    return c == "\\" or ord(c) < 0x20 or ord(c) == 0x7F


def is_unsafe(name: str) -> bool:
    """Whether `name` would be an unsafe path inside an archive someone unzips."""
    return any(_unsafe_char(c) for c in name) or \
        any(part in _COMPONENTS_UNSAFE for part in name.split("/"))


def archive_key(name: str) -> str:
    """The key `name` is stored under: itself, unless it is unsafe as a path; then its unsafe
    characters, and `.`/`..` components whole, are percent-escaped (UTF-8 bytes as %XX)."""
    if not is_unsafe(name):
        return name
    parts = []
    for part in name.split("/"):
        if part in _COMPONENTS_UNSAFE:
            parts.append("%2E" * len(part))
        else:
            parts.append("".join(f"%{ord(c):02X}" if _unsafe_char(c) else c for c in part))
    return "/".join(parts)


def _keys(names: Iterable[str], warn: Callable[[str], None]) -> Dict[str, str]:
    """name -> archive key. Safe names keep theirs; an escaped key that another name already
    holds gets a `~N` suffix (the zip comment maps keys back, so any unique key will do)."""
    names = list(names)
    if "" in names:
        raise InputError("cannot write a tensor with an empty name to an .npz archive")
    keys = {n: n for n in names if not is_unsafe(n)}
    taken = set(keys)
    for name in names:
        if name in keys:
            continue
        key = base = archive_key(name)
        n = 1
        while key in taken:
            n += 1
            key = f"{base}~{n}"
        keys[name] = key
        taken.add(key)
        warn(f"rvvkit: tensor name '{printable(name)}' is unsafe as a path in an archive; "
             f"stored under the key '{key}'")
    return {n: keys[n] for n in names}


def _escapes_comment(keys: Mapping[str, str]) -> bytes:
    """The zip comment recording which keys stand for other names (empty when none do)."""
    escaped = {key: name for name, key in keys.items() if key != name}
    if not escaped:
        return b""
    comment = _COMMENT_TAG + json.dumps(escaped, ensure_ascii=True).encode("ascii")
    if len(comment) > 0xFFFF:   # the zip format's limit on an archive comment
        raise InputError("too many tensor names unsafe as archive paths to record in one .npz")
    return comment


def _escapes(zf_comment: bytes) -> Dict[str, str]:
    """key -> tensor name, from an archive comment written by _escapes_comment (else {})."""
    if not zf_comment.startswith(_COMMENT_TAG):
        return {}
    try:
        table = json.loads(zf_comment[len(_COMMENT_TAG):].decode("ascii"))
    except ValueError:
        return {}
    ok = isinstance(table, dict) and all(isinstance(v, str) for v in table.values())
    return table if ok else {}


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def printable(name: str) -> str:
    """A tensor name safe to print on a terminal (control characters escaped)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def save_npz(path: str, arrays: Mapping[str, np.ndarray],
             warn: Callable[[str], None] = _stderr) -> None:
    """Write `arrays` to `path` atomically, each under archive_key(name) (`warn` gets one line
    per name stored under another key); InputError, the file untouched, on failure."""
    keys = _keys(arrays, warn)
    tmp = f"{path}.{os.getpid()}.tmp.npz"
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, arr in arrays.items():
                with zf.open(keys[name] + ".npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, np.asarray(arr), allow_pickle=False)
            zf.comment = _escapes_comment(keys)
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
            names = _escapes(data.zip.comment)
            return {names.get(k, k): data[k] for k in data.files}
    except MemoryError:
        raise fail("an array is too large for memory") from None
    except EOFError:
        raise fail("the file is empty") from None
    except (OSError, ValueError, zipfile.BadZipFile, KeyError) as exc:
        raise fail(str(exc) or type(exc).__name__) from None
