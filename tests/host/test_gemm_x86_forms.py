"""The x86 branches of the packed GEMM's micro-kernels (codegen/kernels/gemm/emit.py) on
attention's shapes, both operands computed at run time: A read in place by full 12-row panels
(P.V over two k-blocks) and full tiles stored straight into y (one k-block), each compiled three
ways on this host: as the JIT compiles it (-march=native: AVX-512 where the CPU has it), with
AVX-512 off (the 6 x 16 AVX2 blocks) and with AVX off (the generic C)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import rvvkit
from x86_support import host_has

CASES = [
    # id, A shape, B shape, the helper the product must call
    ("pv_two_k_blocks_a_in_place", (2, 47, 700), (2, 700, 64), "_rows_host("),
    ("pv_one_k_block_to_y", (2, 47, 64), (2, 64, 64), "_to_y_host("),
]


pytestmark = pytest.mark.skipif(not host_has("avx2", "fma"),
                                reason="this host has no AVX2/FMA: its JIT compiles only the "
                                       "generic form")


def _model(a_shape, b_shape):
    y_shape = a_shape[:-1] + b_shape[-1:]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], "mm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, a_shape),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, b_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("a_shape, b_shape, helper_call", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_x86_branches_match(a_shape, b_shape, helper_call, monkeypatch, private_jit_cache,
                            compile_counter):
    rng = np.random.default_rng(7)
    feeds = {"a": rng.standard_normal(a_shape).astype(np.float32),
             "b": rng.standard_normal(b_shape).astype(np.float32)}
    want = np.matmul(feeds["a"].astype(np.float64), feeds["b"].astype(np.float64))
    art = rvvkit.build(_model(a_shape, b_shape))
    assert helper_call in art.c_source
    for flags in ("", "-mno-avx512f", "-mno-avx"):
        monkeypatch.setenv("RVVKIT_CFLAGS", flags)
        with rvvkit.load(art, on="host") as s:
            got = s.run(feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3, err_msg=f"flags {flags!r}")
    assert len(compile_counter) == 3
