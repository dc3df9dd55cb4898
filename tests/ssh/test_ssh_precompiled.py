"""A board without a compiler runs the artifact's precompiled kernels and runner (rvvkit pack),
here the emulated RVV board (qemu-riscv64 wrapper) with a compiler that does not exist; a
board whose compiler works still compiles, unless precompiled kernels are preferred."""
from __future__ import annotations

import pytest

import rvvkit
from conftest import run_ort
from rvvkit.errors import CompilerNotFound
from rvvkit.precompile import pack
from ssh_support import assert_close, needs_rvv, needs_sshd, small_feeds, small_model

pytestmark = [pytest.mark.ssh, needs_sshd, needs_rvv]


@pytest.fixture(scope="module")
def packed():
    return pack(rvvkit.build(small_model(), cuda=False), ["riscv64"])


def test_board_without_compiler_runs_precompiled(ssh_world, packed):
    feeds = small_feeds()
    with rvvkit.load(packed, on="ssh://rvv-board?compiler=no-such-cc") as sess:
        assert sess.compiler is None and sess.kernels_from.startswith("precompiled riscv64")
        assert "precompiled" in sess.describe()["label"]
        assert_close(sess.run(feeds), run_ort(small_model(), feeds), "precompiled on rvv-board")


def test_board_with_compiler_jits_unless_preferred(ssh_world, packed):
    with rvvkit.load(packed, on="ssh://rvv-board") as sess:
        assert sess.kernels_from == "jit" and sess.compiler is not None
    with rvvkit.load(packed, on="ssh://rvv-board", prefer_precompiled=True) as sess:
        assert sess.kernels_from.startswith("precompiled")
        sess.run(small_feeds())


def test_board_without_compiler_or_precompiled_kernels(ssh_world):
    with pytest.raises(CompilerNotFound, match="--precompile riscv64"):
        rvvkit.load(rvvkit.build(small_model(), cuda=False),
                    on="ssh://rvv-board?compiler=no-such-cc")
