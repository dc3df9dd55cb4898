"""The x86 softmax row (codegen/kernels/reduce/softmax_x86.py) in the Softmax kernel and in the
attention's workspace, compiled three ways on this host: as the JIT compiles it (-march=native:
AVX-512 where the CPU has it), with AVX-512 off (AVX2) and with AVX off (the portable lanes).
Rows of 1500 (whole vectors and a tail), 37 (mostly tail) and 5 (tail only); a NaN, +inf or a
line of -inf makes its line NaN in every form."""
import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import make_model, run_ort
from x86_support import host_has

node = helper.make_node

pytestmark = pytest.mark.skipif(not host_has("avx2", "fma"),
                                reason="this host has no AVX2/FMA: its JIT compiles only the "
                                       "generic form")
FORMS = ("", "-mno-avx512f", "-mno-avx")


def _each_form(model, feeds, monkeypatch):
    art = rvvkit.build(model)
    assert "rvk_softmax_row(" in art.c_source
    want = run_ort(model, feeds)["y"]
    for flags in FORMS:
        monkeypatch.setenv("RVVKIT_CFLAGS", flags)
        with rvvkit.load(art, on="host") as s:
            got = s.run(feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"flags {flags!r}")


@pytest.mark.parametrize("n", [1500, 37, 5])
def test_softmax_forms(n, monkeypatch, private_jit_cache, compile_counter):
    x = (4 * np.random.default_rng(n).standard_normal((6, n))).astype(np.float32)
    x[1, n // 2], x[2, n - 1], x[3, :], x[4, 0] = np.nan, np.inf, -np.inf, -np.inf
    _each_form(make_model([node("Softmax", ["x"], ["y"], axis=-1)], [("x", x.shape)], ["y"]),
               {"x": x}, monkeypatch)
    assert len(compile_counter) == len(FORMS)


def test_attention_rows_forms(monkeypatch, private_jit_cache):
    b, h, s, d = 1, 2, 300, 16
    nodes = [node("MatMul", ["q", "kt"], ["sc"]), node("Softmax", ["sc"], ["p"], axis=-1),
             node("MatMul", ["p", "v"], ["y"])]
    m = make_model(nodes, [("q", (b, h, s, d)), ("kt", (b, h, d, s)), ("v", (b, h, s, d))],
                   ["y"], opset=17)
    rng = np.random.default_rng(3)
    feeds = {k: rng.standard_normal(shape).astype(np.float32)
             for k, shape in (("q", (b, h, s, d)), ("kt", (b, h, d, s)), ("v", (b, h, s, d)))}
    _each_form(m, feeds, monkeypatch)
