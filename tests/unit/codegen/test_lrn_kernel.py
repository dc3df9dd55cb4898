"""The LRN kernel's shape: the usual betas raise to -beta without libm (a powf per element cost
AlexNet's first LRN 4.8 ms on the host, 0.4 ms without it), and planes split across threads."""
from __future__ import annotations

import re

from rvvkit.codegen.kernels.reduce.norm import lrn


def test_usual_betas_need_no_powf_and_split_by_plane():
    for beta in (0.5, 0.75, 1.0):
        k = lrn((2, 96, 27, 27), 5, 1e-4, beta, 1.0).kernel
        assert not re.search(r"\bpowf\(", k.body), beta
        assert "sqrtf(" in k.body or beta == 1.0
        assert k.split is not None and k.split.units == 2 * 96
        assert "rvk_lo" in k.body


def test_other_betas_keep_powf_and_still_split():
    k = lrn((1, 8, 5, 5), 3, 0.1, 1.3, 1.0).kernel
    assert re.search(r"\bpowf\(", k.body)
    assert "__riscv_" not in k.body
    assert k.split is not None and k.split.units == 8


def test_a_single_plane_is_one_part():
    k = lrn((1, 1, 4, 4), 3, 0.1, 0.75, 1.0).kernel
    assert k.split is None and "rvk_lo" not in k.body
