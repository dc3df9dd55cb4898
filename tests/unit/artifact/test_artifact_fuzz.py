"""Property tests over the Python artifact reader and the meta schema (hypothesis): whatever
the bytes or the meta, reading gives an Artifact or one ArtifactError, never another
exception; and a meta that passes validation and the kernel check describes exactly the
buffers the kernels use. 10^4 inputs per run; scripts/fuzz_nightly.sh runs more."""
from __future__ import annotations

import copy
import math
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import helper

import rvvkit
from conftest import make_model, rand
from rvvkit.artifact import Artifact
from rvvkit.artifact.meta import check_library, declared
from rvvkit.errors import ArtifactError

SCALE = int(os.environ.get("RVVKIT_FUZZ_SCALE", "1"))  # the nightly script raises it
# CI: the same examples every run; the nightly scale explores from its --hypothesis-seed
FAST = settings(deadline=None, derandomize=SCALE == 1, database=None, max_examples=5000 * SCALE,
                suppress_health_check=list(HealthCheck))


def _model():
    return make_model([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1),
                       helper.make_node("Relu", ["y"], ["z"])],
                      [("x", (2, 8))], [("z", (2, 4))], {"w": rand(4, 8)})


ART = rvvkit.build(_model(), cuda=False)
DATA = ART.to_bytes()
SCALAR = (st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats(allow_nan=False)
          | st.text(max_size=8))
# values an edit puts into the meta: scalars, and shallow lists/objects of them (deeper
# nesting adds generation time, not new paths through the validator)
JSON = SCALAR | st.lists(SCALAR, max_size=4) | st.dictionaries(st.text(max_size=6), SCALAR,
                                                                max_size=3)


class Declared:
    """A kernel object's declarations (as cffi would return them), from the real build."""

    def __init__(self, facts):
        self.f = facts

    def rvvkit_num_inputs(self): return len(self.f["inputs"])
    def rvvkit_num_outputs(self): return len(self.f["outputs"])
    def rvvkit_num_steps(self): return self.f["steps"]
    def rvvkit_arena_floats(self): return self.f["arena_floats"]
    def rvvkit_weights_floats(self): return self.f["weights_floats"]
    def rvvkit_input_elems(self, i): return self.f["inputs"][i][0]
    def rvvkit_input_dtype(self, i): return self.f["inputs"][i][1]
    def rvvkit_output_elems(self, i): return self.f["outputs"][i][0]
    def rvvkit_output_dtype(self, i): return self.f["outputs"][i][1]
    def rvvkit_prefill_tokens(self): return self.f["prefill_tokens"]
    def rvvkit_prefill_num_steps(self): return self.f["prefill_steps"]
    def rvvkit_prefill_num_inputs(self): return len(self.f["prefill_inputs"])
    def rvvkit_prefill_num_outputs(self): return self.f["prefill_outputs"]
    def rvvkit_prefill_input_elems(self, i): return self.f["prefill_inputs"][i][0]
    def rvvkit_prefill_input_dtype(self, i): return self.f["prefill_inputs"][i][1]


with rvvkit.load(ART, on="host") as _sess:
    KERNELS = Declared(declared(_sess.lib))


@FAST
@given(st.lists(st.tuples(st.integers(0, len(DATA) - 1), st.integers(0, 255)), min_size=1,
                max_size=6), st.integers(0, len(DATA)))
def test_any_bytes_give_an_artifact_or_one_artifact_error(edits, cut):
    data = bytearray(DATA)
    for pos, val in edits:
        data[pos] = val
    try:
        Artifact.from_bytes(bytes(data[:cut] if cut < len(DATA) // 2 else data)).check_model()
    except ArtifactError as e:
        assert str(e) and "\n" not in str(e).strip()


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            yield from _paths(v, prefix + (i,))


PATHS = [p for p in _paths(ART.meta) if p and p[0] not in ("sections", "format")]


@FAST
@given(st.lists(st.tuples(st.sampled_from(PATHS), JSON | st.integers(0, 64)), min_size=1,
                max_size=3))
def test_edited_meta_is_valid_and_agrees_with_the_kernels_or_is_refused(edits):
    meta = copy.deepcopy(ART.meta)
    for path, value in edits:
        node = meta
        try:
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    try:
        # the container round trip is the bytes test's job; the schema is checked here
        art = Artifact(meta, ART.c_source, ART.weights)
        art.check_model()
        check_library(art.meta, len(art.weights), KERNELS, "the kernels")
    except ArtifactError as e:
        assert "\n" not in str(e)
        return
    # accepted: then every buffer an executor sizes from the meta is what the kernels use
    for key in ("inputs", "outputs"):
        assert [math.prod(t["shape"]) for t in art.meta[key]] == \
            [math.prod(t["shape"]) for t in ART.meta[key]]
    assert art.meta["memory"]["arena_floats"] == ART.meta["memory"]["arena_floats"]
