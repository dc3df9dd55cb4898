"""Kernel specs are declared, not derived: every kernel kind lists its spec keys once
(rvvkit.codegen.kernel.SPEC_KEYS), lowerings must build exactly those (make_spec), and the CUDA
generators read nothing else. Renaming a lowering's parameter can then not silently break CUDA."""
import ast
import inspect
import sys

import pytest

from rvvkit.codegen.cuda import GENERATORS, SERIAL_KINDS
from rvvkit.codegen.kernel import SPEC_KEYS, make_spec
# the lowerings declare their own kinds when their modules load: load them all, so that the
# test does not depend on which other tests ran first in this process
import rvvkit.codegen.lower.core  # noqa: F401,E402


def _keys_read(fn) -> set:
    """Spec keys `fn` reads (spec["k"], spec.get("k")), following calls that pass the spec on
    to other functions of its module."""
    module = sys.modules[fn.__module__]
    tree = ast.parse(inspect.getsource(module))
    defs = {d.name: d for d in ast.walk(tree) if isinstance(d, ast.FunctionDef)}
    keys, seen = set(), set()

    def visit(name: str, param: str) -> None:
        if (name, param) in seen or name not in defs:
            return
        seen.add((name, param))
        for node in ast.walk(defs[name]):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                    and node.value.id == param and isinstance(node.slice, ast.Constant):
                keys.add(node.slice.value)
            elif isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                        and f.value.id == param and f.attr == "get":
                    keys.add(node.args[0].value)
                elif isinstance(f, ast.Name) and f.id in defs:
                    callee = defs[f.id].args.args
                    for i, arg in enumerate(node.args):
                        if isinstance(arg, ast.Name) and arg.id == param and i < len(callee):
                            visit(f.id, callee[i].arg)

    visit(fn.__name__, defs[fn.__name__].args.args[0].arg)
    return keys


def test_every_cuda_kind_is_declared():
    assert set(GENERATORS) <= set(SPEC_KEYS)


@pytest.mark.parametrize("kind", sorted(set(GENERATORS) - SERIAL_KINDS))
def test_cuda_generator_reads_only_declared_keys(kind):
    read = _keys_read(GENERATORS[kind])
    assert read, f"found no spec reads in the {kind} generator"
    undeclared = sorted(read - set(SPEC_KEYS[kind]) - {"op"})
    assert not undeclared, f"CUDA generator of {kind!r} reads undeclared spec keys {undeclared}"


def test_make_spec_insists_on_the_declared_keys():
    spec = make_spec("copy", n_elems=4, dtype="float32")
    assert spec == {"op": "copy", "n_elems": 4, "dtype": "float32"}
    with pytest.raises(TypeError, match="missing"):
        make_spec("copy")
    with pytest.raises(TypeError, match="undeclared"):
        make_spec("copy", n_elems=4, dtype="float32", count=4)


def test_lowerings_build_declared_specs():
    from rvvkit.codegen.kernels.conv import conv2d as conv
    from rvvkit.codegen.kernels.math import elementwise
    from rvvkit.codegen.kernels.gemm import packed as gemm
    from rvvkit.codegen.kernels.movement import layout
    from rvvkit.codegen.kernels.reduce import pool
    from rvvkit.ops.activations import Act
    lowered = [
        conv.conv2d((1, 3, 8, 8), (4, 3, 3, 3), (1, 4, 8, 8), group=1, strides=(1, 1),
                    pads=(1, 1, 1, 1), dilations=(1, 1), bias=True, residual=False, act=None),
        conv.conv2d((1, 4, 8, 8), (4, 1, 3, 3), (1, 4, 8, 8), group=4, strides=(1, 1),
                    pads=(1, 1, 1, 1), dilations=(1, 1), bias=False, residual=False, act=None),
        gemm.gemm(2, 3, 4, b_const=True, c_mode="col"),
        gemm.matmul((2, 3, 4), (4, 5), (2, 3, 5), b_const=False),
        elementwise.nary("Add", [(2, 3), (3,)], (2, 3), None),
        elementwise.unary(Act("relu"), (2, 3)), elementwise.channel_affine((1, 2, 3), None),
        elementwise.copy(6), layout.transpose((2, 3), (1, 0)), layout.concat([(1, 2), (1, 3)], 1),
        pool.pool2d("max", (1, 1, 4, 4), (1, 1, 2, 2), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1)),
        pool.global_pool("avg", (1, 2, 3, 3)), pool.lrn((1, 4, 2, 2), 3, 1e-4, 0.75, 1.0),
        pool.softmax((2, 5), 1, False),
    ]
    for low in lowered:
        spec = low.kernel.spec
        assert set(spec) == set(SPEC_KEYS[spec["op"]]) | {"op"}, spec["op"]
