"""The RVV intrinsic paths are invisible to non-RVV compilers, and the micro-kernel plan keeps
its accumulators in the 32 vector registers at every VLEN (no qemu needed; the kernels run
under qemu in tests/qemu/test_rvv_kernels.py)."""
import re
import shutil
import subprocess

import pytest

import rvvkit
from rvvkit.codegen.kernels.gemm.emit import ukernel
from rvvkit.codegen.kernels.gemm.tiling import NRS
from rvvkit.codegen.kernels.gemm.rvv_lmul import (LMULS, VLENS, row_groups, rows_per_group,
                                                  uk_cost, uk_plan, unroll)
from rvvkit.zoo import light_model


@pytest.mark.parametrize("mr", range(1, 15))
@pytest.mark.parametrize("nr", NRS)
@pytest.mark.parametrize("ind", ["", "a", "b"])
def test_micro_kernel_plan_fits_registers(mr, nr, ind):
    plan = uk_plan(mr, nr, ind)
    assert [v for v, _ in plan] == sorted(v for v, _ in plan) and plan[-1][0] == VLENS[-1]
    for vlen, lmul in plan:
        assert lmul in LMULS
        groups = row_groups(mr, lmul)
        assert groups[0][0] == 0 and groups[-1][1] == mr
        assert all(a1 == b0 for (_, a1), (b0, _) in zip(groups, groups[1:]))
        for r0, r1 in groups:
            rows = r1 - r0
            # accumulators plus one b vector (two when the k loop is unrolled)
            assert 1 <= rows <= rows_per_group(lmul)
            assert (rows + unroll(rows, lmul)) * lmul <= 32
        # the chosen LMUL is the cheapest at that VLEN
        best = min(uk_cost(mr, nr, L, vlen, ind) for L in LMULS)
        assert uk_cost(mr, nr, lmul, vlen, ind) == best


def test_micro_kernel_source_has_each_planned_variant():
    name, code = ukernel(13, 32, "b")
    for _, lmul in uk_plan(13, 32, "b"):
        assert f"{name}_lmul{lmul}(" in code
        assert f"__riscv_vfmacc_vf_f32m{lmul}(" in code
    # the portable body is still there, after the #else
    assert re.search(r"#else\n    float acc\[13\]\[32\];", code)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_x86_preprocessed_source_has_no_rvv_code(tmp_path):
    """What gcc compiles on x86 (and GCC 12 for riscv64, which has no riscv_vector.h) is the
    portable code only: no intrinsic, vector type or RVV header survives preprocessing."""
    src = tmp_path / "m.c"
    src.write_text(rvvkit.build(light_model("shufflenet")).c_source)
    assert "__riscv_vfmacc_vf" in src.read_text()
    out = subprocess.run(["gcc", "-E", "-P", str(src)], capture_output=True, text=True,
                         check=True).stdout
    assert not re.search(r"__riscv_v|vfloat32|riscv_vector|rvk_vcopy|rvk_vzero", out)
    assert "memcpy(" in out and "rvk_gemm_micro_" in out
