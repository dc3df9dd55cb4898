"""Small defects of issue 12: doctor's intrinsic labels, its board compiler survey, QEMU on a
riscv64 machine, and "+" in a board URL's query."""
from __future__ import annotations

import pytest

from rvvkit import doctor
from rvvkit.errors import ExecutorUnavailable
from rvvkit.jit import targets
from rvvkit.runtime.boards import parse_url


def test_intrinsic_levels_name_the_api_each_compiler_gives():
    # GCC 14 defines __riscv_v_intrinsic 12000: the v0.12 API, not 1.0 (that is 1000000).
    assert doctor._intrinsic_level("12000") == "12000 (0.12 API, as GCC 14)"
    assert "0.11 API" in doctor._intrinsic_level("11000")
    assert "1.0 API" in doctor._intrinsic_level("1000000")
    assert doctor._intrinsic_level("4242") == "4242"  # unknown levels are shown as they are


def test_board_survey_lists_versioned_gccs():
    # A Debian 13 board has gcc (= gcc-14) and gcc-13; doctor --on ssh:// must list both.
    survey = targets.riscv().compilers["board_survey"]
    assert {"gcc-13", "gcc-14"} <= set(survey) and survey[:2] == ["cc", "gcc"]
    assert doctor.BOARD_COMPILERS == tuple(survey)


def _no_qemu(*_a, **_k):
    raise ExecutorUnavailable("QEMU not found: 'qemu-riscv64' (from PATH) is not an executable")


def test_missing_qemu_is_no_problem_on_riscv64(monkeypatch):
    from rvvkit.runtime import qemu
    monkeypatch.setattr(qemu, "resolve_qemu", _no_qemu)
    monkeypatch.setattr(doctor.platform, "machine", lambda: "riscv64")
    rows = dict(doctor._qemu_rows())
    assert "problem" not in rows
    assert "riscv64" in rows["not needed"] and "QEMU not found" in rows["not needed"]


def test_missing_qemu_is_a_problem_elsewhere(monkeypatch):
    from rvvkit.runtime import qemu
    monkeypatch.setattr(qemu, "resolve_qemu", _no_qemu)
    monkeypatch.setattr(doctor.platform, "machine", lambda: "x86_64")
    assert dict(doctor._qemu_rows())["problem"].startswith("QEMU not found")


@pytest.mark.parametrize("query, want", [
    ("compiler=g++", {"compiler": "g++"}),                       # was "g  "
    ("compiler=riscv64-linux-gnu-g++", {"compiler": "riscv64-linux-gnu-g++"}),
    ("compiler=g++-13&cflags=-O2+-DX", {"compiler": "g++-13", "cflags": "-O2 -DX"}),
    ("compiler=clang%2B%2B", {"compiler": "clang++"}),
    ("wrapper=a%2Bb+c", {"wrapper": "a+b c"}),                  # %2B: always a literal "+"
    ("trust_new_host", {"trust_new_host": ""}),
])
def test_board_url_query_keeps_plus_in_compiler_names(query, want):
    assert parse_url(f"ssh://board?{query}")[3] == want
