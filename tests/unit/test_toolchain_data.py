"""toolchain/ and runtime_c/ as data: the resource locator finds them, every target and board
preset file loads and says what the code relies on, and a boards-file table can name a
preset."""
from __future__ import annotations

import pytest

from rvvkit import resources
from rvvkit.errors import RvvkitError
from rvvkit.jit import targets
from rvvkit.runtime import boards


def test_locator_finds_both_folders():
    rc, tc = resources.runtime_c_dir(), resources.toolchain_dir()
    for name in ("runner.c", "rvk_elf.h", "rvk_npy.h", "rvvkit_abi.h", "Makefile"):
        assert (rc / name).is_file(), name
    for parts in (("targets", "riscv64-linux-gnu.toml"), ("cmake", "riscv64-gcc.cmake"),
                  ("qemu_plugin", "qemu_icount.c"), ("cuda_emu", "rvk_cuda_emu.h")):
        assert resources.toolchain_file(*parts).is_file(), parts


def test_runtime_c_holds_only_target_code():
    names = {p.name for p in resources.runtime_c_dir().iterdir() if p.is_file()}
    assert not {"qemu_icount.c", "rvk_cuda_emu.h"} & names  # host-side tools: toolchain/
    assert not [n for n in names if n.endswith(".py")]


def test_missing_file_is_a_clear_error():
    with pytest.raises(RvvkitError, match="no-such.h.*reinstall"):
        resources.runtime_c_file("no-such.h")


def test_every_target_file_loads():
    names = sorted(p.stem for p in (resources.toolchain_dir() / "targets").glob("*.toml"))
    assert names == ["nvcc", "riscv64-linux-gnu", "x86_64-linux-gnu"]
    for name in names:
        assert targets.target(name).triple


def test_riscv_facts():
    rv = targets.riscv()
    assert rv.triple == "riscv64-linux-gnu" and rv.arch == "riscv64"
    assert rv.default_vlen in rv.vlens and all(v & (v - 1) == 0 for v in rv.vlens)
    assert f"vlen={rv.vlens[-1]}," in rv.cpu_string(rv.vlens[-1])
    assert rv.cpu_string(128, True).startswith(rv.cpu_string(128) + ",")
    assert rv.family_flags("clang").names_target and not rv.family_flags("gcc").names_target
    assert rv.family_flags("unknown") == rv.family_flags("gcc")
    assert "-march=rv64gcv" in rv.family_flags("gcc").arch
    for key in ("native", "cross", "fallback", "survey", "board_survey"):
        assert rv.compilers[key], key
    assert rv.get("qemu", "plugin", "source").endswith(".c")


def test_a_missing_key_names_the_file():
    with pytest.raises(RvvkitError, match=r"riscv64-linux-gnu.toml: missing key 'qemu.nope'"):
        targets.riscv().get("qemu", "nope")


@pytest.mark.parametrize("name,cores,vlen", [("k1", 8, 256), ("k230", 1, 128),
                                             ("sg2044", 64, 128)])
def test_board_presets(name, cores, vlen):
    p = targets.board_preset(name)
    assert (p["cores"], p["vlen"]) == (cores, vlen) and p["name"] and p["cpu"]
    assert set(p["options"]) <= set(boards.OPTIONS)


@pytest.fixture
def boards_file(tmp_path, monkeypatch):
    path = tmp_path / "boards.toml"
    monkeypatch.setenv("RVVKIT_BOARDS", str(path))
    monkeypatch.setenv("RVVKIT_SSH_CONFIG", str(tmp_path / "no-ssh-config"))
    return path


def test_boards_file_table_can_name_a_preset(boards_file):
    boards_file.write_text('[bpi]\npreset = "k1"\ncflags = "-O2"\n'
                           '[mine]\npreset = "k230"\narch = "x86_64"\n'
                           '[bad]\npreset = "k9"\n')
    cfg = boards.board_config("ssh://bpi")
    assert (cfg.preset, cfg.arch, cfg.cflags) == ("k1", "riscv64", ["-O2"])
    assert boards.board_config("ssh://mine").arch == "x86_64"  # the table wins
    with pytest.raises(RvvkitError, match="unknown preset 'k9'.*k1, k230, sg2044"):
        boards.board_config("ssh://bad")


def test_the_wheel_ships_every_data_file():
    """Every file of toolchain/ and runtime_c/ that rvvkit reads matches pyproject.toml's
    package-data, so a wheel (a board's install) has it: an ISA profile left out once made
    every compile on a board fail."""
    import fnmatch
    from pathlib import Path
    try:
        import tomllib
    except ImportError:      # Python < 3.11
        import tomli as tomllib
    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package, folder in data["package-dir"].items():
        globs = data["package-data"][package]
        for path in (root / folder).rglob("*"):
            rel = path.relative_to(root / folder).as_posix()
            if path.is_file() and not rel.startswith(".") and "__pycache__" not in rel:
                assert any(fnmatch.fnmatch(rel, g) and rel.count("/") == g.count("/")
                           for g in globs), f"{folder}/{rel} is not in the wheel ({package})"
