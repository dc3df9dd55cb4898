"""The operator table: every op with semantics is lowered (or says why it never needs a kernel),
every kernel kind has a CUDA generator, internal ops stay outside the ONNX namespace, and an
activation is one row of one table."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rvvkit.codegen.lower  # noqa: F401  (attaches the C lowerings to the table)
from rvvkit.codegen.cuda import GENERATORS
from rvvkit.codegen.kernel import SPEC_KEYS
from rvvkit.codegen.kernels.math.elementwise import OPERATORS
from rvvkit.ops import REGISTRY
from rvvkit.ops.activations import ACTIVATIONS, BY_OP, Act
from rvvkit.ops.elementwise import BINARY


def test_every_op_is_lowered_or_says_why_not():
    missing = sorted(op for op, d in REGISTRY.items() if d.lower is None and not d.without_kernel)
    assert missing == [], "ops with semantics but no C lowering"
    both = sorted(op for op, d in REGISTRY.items() if d.lower is not None and d.without_kernel)
    assert both == []


def test_every_kernel_kind_has_a_cuda_generator():
    assert sorted(set(SPEC_KEYS) - set(GENERATORS)) == [], "kernel kinds without a CUDA form"
    assert sorted(set(GENERATORS) - set(SPEC_KEYS)) == [], "generators of undeclared kinds"


def test_every_broadcasting_binary_has_a_c_form():
    assert set(BINARY) | {"Sum"} <= set(OPERATORS)


def test_internal_ops_live_outside_the_onnx_namespace():
    internal = sorted(op for op, d in REGISTRY.items() if d.internal)
    assert internal == ["rvvkit.CacheWrite", "rvvkit.ChannelAffine", "rvvkit.QConv",
                        "rvvkit.QDQAdd", "rvvkit.QMatMul", "rvvkit.Silu"]
    assert all(REGISTRY[op].domain == "rvvkit" for op in internal)
    # other domains' ops (onnxruntime's contrib ops of quantized models) carry their domain
    from rvvkit.frontend.onnx import EXTRA_DOMAINS
    assert all("." not in op or d.domain in EXTRA_DOMAINS
               for op, d in REGISTRY.items() if not d.internal)


@pytest.mark.parametrize("kind", sorted(ACTIVATIONS))
def test_activation_row_is_a_whole_operator(kind):
    row = ACTIVATIONS[kind]
    for op in row.onnx_ops:
        assert BY_OP[op] is row
        assert REGISTRY[op].evaluate is not None and REGISTRY[op].lower is not None
    params = {"clip": (-1.0, 2.0), "leaky_relu": (0.2,),
              "hard_sigmoid": (0.2, 0.5), "swish": (1.702,), "elu": (0.5,), "celu": (2.0,),
              "selu": (1.5, 2.0), "thresholded_relu": (0.3,),
              "shrink": (0.5, 0.5)}.get(kind, ())
    act = Act(kind, params)
    assert "v" in act.c_expr("v") and "v" in act.cuda_expr("v")
    assert act.has_vector_form == (row.rvv is not None)
    x = np.linspace(-3, 3, 13, dtype=np.float32)
    assert act.apply_numpy(x).shape == x.shape


def test_forms_of_the_existing_activations():
    """The exact text the kernels contain (generated C must not move by accident). The forms
    keep NaN as onnxruntime does (issue 12): `v < 0 ? 0 : v`, and on RVV a compare into a
    mask plus the masked (`_mu`) max/min, since vfmax/vfmin drop a NaN operand."""
    assert Act("relu").c_expr("v") == "(v < 0.0f ? 0.0f : v)"
    # sigmoid and tanh call rvvkit's call-free e^x in C (so loops vectorise), and the same
    # helpers on CUDA (one text, codegen/c.py MATH), so both give the same floats
    assert Act("sigmoid").c_expr("v") == "rvk_sigmoidf(v)"
    assert Act("sigmoid").cuda_expr("v") == "rvk_sigmoidf(v)"
    assert Act("tanh").cuda_expr("o") == "rvk_tanhf(o)"
    assert Act("relu").rvv_expr("acc", 4) == ("__riscv_vfmax_vf_f32m4_mu(__riscv_vmfeq_vv_"
                                              "f32m4_b8(acc, acc, vl), acc, acc, 0.0f, vl)")
    assert Act("leaky_relu", (0.5,)).rvv_expr("v", 8) == (
        "__riscv_vfmul_vf_f32m8_mu(__riscv_vmflt_vf_f32m8_b4(v, 0.0f, vl), v, v, 0.5f, vl)")
    # clip: vfmin's masked-off lanes come from the vfmax result (the same NaNs), not from v,
    # so clang keeps no copy of v (rvv.vclamp); the repeated vfmax is computed once
    mx = "__riscv_vfmax_vf_f32m8_mu(__riscv_vmfeq_vv_f32m8_b4(v, v, n), v, v, 0.0f, n)"
    assert Act("clip", (0.0, 6.0)).rvv_expr("v", 8, "n") == (
        f"__riscv_vfmin_vf_f32m8_mu(__riscv_vmfeq_vv_f32m8_b4(v, v, n), {mx}, {mx}, 6.0f, n)")
    # sigmoid and tanh call the vector exp helpers (codegen/kernels/math/vmath.py), carried as
    # support
    assert Act("tanh").rvv_expr("v", 8) == "rvk_vtanh_f32m8(v, vl)"
    assert any("rvk_vexp_f32m4(" in t for t in Act("sigmoid").rvv_support(4).values())
    assert not Act("thresholded_relu", (1.0,)).has_vector_form
    with pytest.raises(ValueError, match="no vector form"):
        Act("thresholded_relu", (1.0,)).rvv_expr("v", 8)
    # fused-epilogue helper names hash the repr: it stays two fields
    assert repr(Act("clip", (0.0, 6.0))) == "Act(kind='clip', params=(0.0, 6.0))"


NEW_ACTIVATION = textwrap.dedent("""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    from rvvkit.ops.activations import ActivationDef, define

    define(ActivationDef("softsign", ("Softsign",), numpy=lambda x: x / (1 + np.abs(x)),
                         c=lambda v: f"({v} / (1.0f + fabsf({v})))"))

    from rvvkit.codegen.c import render
    from rvvkit.codegen.cuda.render import render_cuda
    from rvvkit.codegen.plan import build_plan
    from rvvkit.frontend.onnx import from_onnx
    from rvvkit.passes import optimize

    k = np.array([-2, 0, 3], np.float32)
    n = helper.make_node
    g = helper.make_graph(
        [n("Conv", ["x", "w"], ["c"], name="conv"), n("Softsign", ["c"], ["y"], name="ss"),
         n("Softsign", ["k"], ["kk"], name="fold"), n("Add", ["x", "kk"], ["a"], name="add"),
         n("Softsign", ["a"], ["z"], name="alone_after"), n("Softsign", ["x"], ["u"], name="u")],
        "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 1, 3, 3))],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in "yzu"],
        [numpy_helper.from_array(np.ones((2, 1, 1, 1), np.float32), "w"),
         numpy_helper.from_array(k, "k")])
    graph = optimize(from_onnx(helper.make_model(g)))
    ops = [(nd.op, nd.name, nd.act and nd.act.kind, nd.fused) for nd in graph.nodes]
    assert ops == [("Conv", "conv", "softsign", [("Softsign", "ss")]),
                   ("Add", "add", "softsign", [("Softsign", "alone_after")]),
                   ("Softsign", "u", None, [])], ops
    folded = graph.const(graph.nodes[1].inputs[1])
    assert np.array_equal(folded, k / (1 + np.abs(k))), folded
    plan = build_plan(graph)
    c, cu = render(plan), render_cuda(plan)
    assert c.count("fabsf(") >= 3 and cu.count("fabsf(") >= 3
    print("ok")
""")


def test_a_new_activation_is_one_entry():
    """One `define` (a row of the table) and the op is folded on constants, fused into
    producers' epilogues and lowered on its own, in C and in CUDA. A fresh interpreter:
    the lowering attaches to rows defined before rvvkit.codegen is imported."""
    out = subprocess.run([sys.executable, "-c", NEW_ACTIVATION], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok"
