"""Operator cases: GridSample (opset 16 names bilinear/bicubic on 4-D input, opset 20+ names
linear/cubic and 5-D input), each padding mode and align_corners, the grid a run-time input or
a constant; run on the sampled executors (`op_executor`) and compared with onnxruntime. Cases
onnxruntime does not take (other than 2 or 3 spatial axes) or computes otherwise (cubic with
border padding: it clamps the neighbours, not the coordinate, as PyTorch does) are compared
with the ONNX reference implementation instead."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import assert_matches, make_model, rand, run_rvvkit

F = TensorProto.FLOAT


def grid(shape, spread, seed=1):
    """Normalised coordinates spread over [-spread, spread] with exact ties of nearest
    rounding (-0.5, 0, 0.5 fall half-way between samples when the axis is even) mixed in."""
    g = rand(*shape, seed=seed) * np.float32(spread / 2)
    g.reshape(-1)[:6] = [-1.0, -0.5, 0.0, 0.5, 1.0, 0.25]
    return g


def model(x_shape, g_shape, opset, const_grid=None, **attrs):
    node = helper.make_node("GridSample", ["x", "g"], ["y"], **attrs)
    ins = [helper.make_tensor_value_info("x", F, list(x_shape))]
    inits = None
    if const_grid is None:
        ins.append(helper.make_tensor_value_info("g", F, list(g_shape)))
    else:
        inits = {"g": const_grid}
    return make_model([node], ins, [helper.make_tensor_value_info("y", F, None)], inits,
                      opset=opset)


CASES = [
    # id, x shape, grid shape, opset, mode, padding, align_corners, grid spread, constant grid
    ("bilinear_zeros", (2, 3, 4, 5), (2, 6, 7, 2), 16, "bilinear", "zeros", 0, 2.6, False),
    ("nearest_reflection_ties", (1, 2, 4, 6), (1, 5, 3, 2), 16, "nearest", "reflection", 0,
     5.0, False),
    ("bicubic_zeros_const_grid", (1, 2, 5, 4), (1, 3, 6, 2), 16, "bicubic", "zeros", 0, 2.4,
     True),
    ("cubic_reflection_align", (2, 1, 4, 3), (2, 5, 4, 2), 20, "cubic", "reflection", 1, 6.0,
     False),
    ("linear_border_3d", (1, 2, 3, 4, 5), (1, 2, 3, 4, 3), 20, "linear", "border", 0, 3.0,
     False),
    ("nearest_zeros_3d_align", (2, 1, 4, 3, 2), (2, 3, 2, 2, 3), 22, "nearest", "zeros", 1, 2.5,
     False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gridsample(case, op_executor):
    _, xs, gs, opset, mode, pad, align, spread, const = case
    g = grid(gs, spread)
    m = model(xs, gs, opset, g if const else None, mode=mode, padding_mode=pad,
              align_corners=align)
    feeds = {"x": rand(*xs)} if const else {"x": rand(*xs), "g": g}
    assert_matches(m, feeds, on=op_executor)


@pytest.mark.parametrize("xs,gs,mode,pad", [
    ((1, 2, 6), (1, 7, 1), "cubic", "reflection"),              # one spatial axis
    ((1, 1, 5, 4), (1, 3, 4, 2), "cubic", "border"),            # coordinate clamped first
])
def test_gridsample_vs_onnx_reference(xs, gs, mode, pad):
    from onnx.reference import ReferenceEvaluator
    m = model(xs, gs, 22, mode=mode, padding_mode=pad)
    feeds = {"x": rand(*xs), "g": grid(gs, 3.0)}
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    np.testing.assert_allclose(run_rvvkit(m, feeds)["y"], want, rtol=1e-4, atol=1e-5)
