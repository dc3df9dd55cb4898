"""The host's x86 forms of MatMulNBits with int8 activations (codegen/kernels/llm/
nbits_x86.py) give the portable form's results bit for bit: the same artifact run on this
host as compiled (-march=native: VNNI where the CPU has it), with VNNI switched off (the AVX2
branch) and with AVX2 switched off (RVVKIT_CFLAGS=-mno-avx2, the portable branch). Row counts
2 and 3 take the two-row form and a last odd row."""
import numpy as np
import pytest

import rvvkit
from nbits_cases import nbits_model
from x86_support import host_has

CASES = [
    # id, rows, K, N, bits, block, zero points, bias
    ("acc4_b4_wide_zp_bias", 3, 96, 301, 4, 32, "u8", True),
    ("acc4_s16_b4_blk16", 2, 64, 200, 4, 16, "", False),
    ("acc4_h16_b4_zp", 1, 64, 130, 4, 32, "u8", False),
    ("acc4_b8_zp_bias", 2, 128, 150, 8, 32, "u8", True),
    ("acc4_i8f_b4_float_zp", 2, 96, 130, 4, 32, "f32", False),   # a GGUF file's Q4_K
    ("acc4_s16_b8_blk64", 1, 256, 96, 8, 64, "", False),
]


pytestmark = pytest.mark.skipif(not host_has("avx2", "fma", "f16c"),
                                reason="this host has no AVX2/FMA/F16C: its JIT compiles "
                                       "only the portable form")


@pytest.mark.parametrize("rows, k, n, bits, block, zp, bias", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_x86_forms_equal_portable(rows, k, n, bits, block, zp, bias, monkeypatch, request,
                                  private_jit_cache, compile_counter):
    """Native (VNNI where the CPU has it), AVX2 without VNNI, and portable: one result."""
    model, feeds = nbits_model(request.node.callspec.id, rows, k, n, bits, block, zp, bias)
    art = rvvkit.build(model)
    assert "RVK_DPBUSD" in art.c_source and "_mm256_madd" in art.c_source
    got = []
    for flags in ("", "-mno-avx512vnni -mno-avxvnni", "-mno-avx2"):
        monkeypatch.setenv("RVVKIT_CFLAGS", flags)
        with rvvkit.load(art, on="host") as s:
            got.append(s.run(feeds)["y"])
    assert len(compile_counter) == 3 and "-mno-avx2" in compile_counter[2]
    np.testing.assert_array_equal(got[0], got[2])
    np.testing.assert_array_equal(got[1], got[2])
