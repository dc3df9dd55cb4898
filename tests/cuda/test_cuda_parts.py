"""The parts form of a split C kernel (rvvkit/codegen/cuda/serial.py): one GPU function per
distinct count of parts. Two RMS norms of one body over different numbers of rows (a query
head norm over 64 rows and a key head norm over 32, as a Qwen3 prompt chunk has) used to
share one function, whose bound was the first's: the second launch ran past its rows, which
crashed the emulator or gave another model's tokens."""
from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import rvvkit

pytestmark = pytest.mark.cuda


def _two_head_norms():
    f32 = TensorProto.FLOAT
    inits, nodes, outs = [], [], []
    for name, heads in (("q", 4), ("k", 2)):
        inits += [numpy_helper.from_array(np.array([0, 0, heads, 32], np.int64), name + "_s"),
                  numpy_helper.from_array(np.linspace(0.5, 1.5, 32, dtype=np.float32),
                                          name + "_w")]
        nodes += [helper.make_node("Reshape", [name, name + "_s"], [name + "_h"]),
                  helper.make_node("SimplifiedLayerNormalization", [name + "_h", name + "_w"],
                                   [name + "_n"], axis=-1, epsilon=1e-6)]
        outs.append(helper.make_tensor_value_info(name + "_n", f32, [1, 16, heads, 32]))
    ins = [helper.make_tensor_value_info("q", f32, [1, 16, 128]),
           helper.make_tensor_value_info("k", f32, [1, 16, 64])]
    return helper.make_model(helper.make_graph(nodes, "norms", ins, outs, inits),
                             opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_parts_of_different_counts_are_different_functions():
    art = rvvkit.build(_two_head_norms())
    bounds = re.findall(r"if \(rvk_lo >= (\d+)\) return;", art.cu_source)
    assert sorted(map(int, bounds)) == [32, 64], bounds
    feeds = {"q": np.random.default_rng(0).standard_normal((1, 16, 128)).astype(np.float32),
             "k": np.random.default_rng(1).standard_normal((1, 16, 64)).astype(np.float32)}
    with rvvkit.load(art, on="host") as host, rvvkit.load(art, on="cuda-emu") as emu:
        want, got = host.run(feeds), emu.run(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)
