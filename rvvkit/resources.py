"""Where rvvkit's non-Python files are: the target-side C (`runtime_c/`) and the toolchain data
and host tools (`toolchain/`), both top-level folders of the repository.

A wheel carries them as the data packages `rvvkit._runtime_c` and `rvvkit._toolchain`
(pyproject.toml maps the folders there with `package-dir`), i.e. as folders inside the
installed `rvvkit`. An editable install maps those names onto the repository folders, but its
import hook (setuptools 65) cannot find a sub-package without __init__.py, and a checkout on
PYTHONPATH has no mapping at all: both are served by the fallback, the folders beside the
`rvvkit` package. Files are returned as real paths, since compilers are handed them
(`-include`, the sources of the runner and of the QEMU plugin).

    resources.runtime_c_file("runner.c")
    resources.toolchain_file("targets", "riscv64-linux-gnu.toml")
    resources.load_toml(path)
"""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any, Dict, Optional

from .errors import RvvkitError

_PACKAGE_ROOT = Path(__file__).resolve().parent
# (data package of an installed rvvkit, folder of the repository): one per resource folder.
_FOLDERS = {"runtime_c": ("rvvkit._runtime_c", "runtime_c"),
            "toolchain": ("rvvkit._toolchain", "toolchain")}


def _installed(package: str) -> Optional[Path]:
    """The directory of a data package, or None when this installation has none."""
    inside = _PACKAGE_ROOT / package.rpartition(".")[2]
    if inside.is_dir():  # a wheel's layout
        return inside
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        if Path(location).is_dir():
            return Path(location)
    return None


@functools.lru_cache(maxsize=None)
def _folder(key: str) -> Path:
    package, folder = _FOLDERS[key]
    found = _installed(package)
    if found is not None:
        return found
    repo = _PACKAGE_ROOT.parent / folder
    if repo.is_dir():
        return repo
    raise RvvkitError(f"rvvkit's {folder}/ folder is missing from this installation (neither "
                      f"the package {package} nor {repo} exists); reinstall rvvkit")


def runtime_c_dir() -> Path:
    """The C that runs on the target: runner.c, its readers, rvvkit_abi.h, the Makefile."""
    return _folder("runtime_c")


def toolchain_dir() -> Path:
    """Target and compiler facts (targets/, boards/), CMake files and host-side tools."""
    return _folder("toolchain")


def _file(root: Path, parts) -> Path:
    path = root.joinpath(*parts)
    if not path.is_file():
        raise RvvkitError(f"{path} is missing from this installation; reinstall rvvkit")
    return path


def runtime_c_file(*parts: str) -> Path:
    return _file(runtime_c_dir(), parts)


def toolchain_file(*parts: str) -> Path:
    return _file(toolchain_dir(), parts)


def _toml_module():
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # Python 3.9/3.10: the same parser, from PyPI
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise RvvkitError("reading TOML on Python < 3.11 needs the tomli package "
                              "(pip install tomli)") from None
    return tomllib


def load_toml(path: Path, what: str = "") -> Dict[str, Any]:
    """A TOML document as a dict; RvvkitError naming the file (and `what` it is: "boards
    file") when it cannot be read."""
    toml = _toml_module()
    try:
        with open(path, "rb") as fh:
            return toml.load(fh)
    except (OSError, toml.TOMLDecodeError) as exc:
        raise RvvkitError(f"cannot read {what + ' ' if what else ''}{path}: {exc}") from None
