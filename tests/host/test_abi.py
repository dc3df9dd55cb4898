"""The plan ABI is declared once, in runtime_c/rvvkit_abi.h: the version Python uses, the cffi
declarations and the generated source all come from it, and the host executor refuses an
object of another version."""
from __future__ import annotations

import re

import cffi
import pytest
from onnx import helper

import rvvkit
from conftest import make_model, rand
from rvvkit.artifact import abi
from rvvkit.artifact import Artifact
from rvvkit.codegen import c as cgen
from rvvkit.errors import ExecutionError
from rvvkit.resources import runtime_c_file

FUNCTIONS = ("rvvkit_abi_version", "rvvkit_num_steps", "rvvkit_arena_floats",
             "rvvkit_weights_floats", "rvvkit_num_inputs", "rvvkit_num_outputs",
             "rvvkit_input_elems", "rvvkit_output_elems", "rvvkit_input_dtype",
             "rvvkit_output_dtype", "rvvkit_step", "rvvkit_run_timed",
             "rvvkit_run")


def _art():
    model = make_model([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)],
                       [("x", (1, 5))], [("y", (1, 3))], {"w": rand(3, 5)})
    return rvvkit.build(model)


def test_version_comes_from_the_header():
    text = runtime_c_file("rvvkit_abi.h").read_text()
    declared = int(re.search(r"#define RVVKIT_ABI_VERSION (\d+)", text).group(1))
    assert abi.ABI_VERSION == cgen.ABI_VERSION == declared


def test_cdef_is_the_header_without_preprocessor_lines():
    cdef = abi.cdef()
    assert 'extern "C"' not in cdef and not any(ln.startswith("#") for ln in cdef.splitlines())
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    for name in FUNCTIONS:
        assert re.search(rf"\b{name}\(", cdef), name
    assert ffi.typeof("rvvkit_run_timed_fn").kind == "function"  # the dlsym pointer types


def test_generated_source_embeds_the_header_once():
    src = _art().c_source
    assert src.count("#define RVVKIT_ABI_VERSION") == 1
    assert "return RVVKIT_ABI_VERSION;" in src and '#include "rvvkit_abi.h"' not in src


def test_host_session_refuses_another_abi_version():
    art = _art()
    src = art.c_source.replace("return RVVKIT_ABI_VERSION;", "return 999;")
    assert src != art.c_source
    bad = Artifact(art.meta, src, art.weights, cu_source=art.cu_source)
    with pytest.raises(ExecutionError, match="ABI 999"):
        rvvkit.load(bad, on="host")
