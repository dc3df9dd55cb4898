"""The artifact meta is validated before anything sizes buffers from it, and compared with what
the compiled kernels declare (rvvkit/artifact/meta.py): edited metas with recomputed
checksums are refused with one ArtifactError, by the API, the host executor and the CLI."""
from __future__ import annotations

import copy
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

import rvvkit
from conftest import make_model, rand
from rvvkit.artifact import Artifact
from rvvkit.artifact.meta import validate_meta
from rvvkit.errors import ArtifactError


@pytest.fixture(scope="module")
def art():
    model = make_model([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1),
                        helper.make_node("Relu", ["y"], ["z"])],
                       [("x", (2, 8))], [("z", (2, 4))], {"w": rand(4, 8)})
    return rvvkit.build(model)


def edited(art, edit) -> Artifact:
    meta = copy.deepcopy(art.meta)
    edit(meta)
    # through bytes: every checksum recomputed, as a careful attacker would
    return Artifact.from_bytes(Artifact(meta, art.c_source, art.weights).to_bytes())


SCHEMA_CASES = {
    "no-outputs": (lambda m: m.pop("outputs"), "outputs is NoneType, not a list"),
    "empty-outputs": (lambda m: m.update(outputs=[]), "outputs is empty"),
    "inputs-not-list": (lambda m: m.update(inputs={"x": 1}), "inputs is dict"),
    "negative-dim": (lambda m: m["inputs"][0].update(shape=[2, -8]), "inputs[0].shape[1]"),
    "float-dim": (lambda m: m["inputs"][0].update(shape=[2, 8.0]), "not an integer"),
    "bool-dim": (lambda m: m["inputs"][0].update(shape=[True, 8]), "not an integer"),
    "overflow": (lambda m: m["outputs"][0].update(shape=[2 ** 31, 2 ** 31]), "outputs[0]"),
    "deep-rank": (lambda m: m["outputs"][0].update(shape=[1] * 65), "more than 64"),
    "bad-dtype": (lambda m: m["outputs"][0].update(dtype="float128"), "dtype"),
    "name-not-str": (lambda m: m["inputs"][0].update(name=7), "inputs[0].name"),
    "dup-output": (lambda m: m["outputs"].append(dict(m["outputs"][0])), "twice"),
    "arena-missing": (lambda m: m["memory"].pop("arena_floats"), "memory.arena_floats"),
    "memory-not-dict": (lambda m: m.update(memory=[]), "memory is list"),
    "plan-step-str": (lambda m: m["plan"].append("k"), "is str, not an object"),
    "unknown-kernel": (lambda m: m["plan"][0].update(kernel="nope"), "not in 'kernels'"),
    "arg-kind": (lambda m: m["plan"][0]["args"][0].update(kind="disk"), "args[0].kind"),
    "arg-offset": (lambda m: m["plan"][0]["args"][0].update(offset=-1), "args[0].offset"),
    "arena-offset": (lambda m: m["plan"][0]["args"][-1].update(offset=2 ** 45), "offset"),
    "output-index": (lambda m: m["plan"][-1]["args"][-1].update(index=5), "index"),
    "fused": (lambda m: m["plan"][0].update(fused=[1]), "fused"),
    "vlen": (lambda m: m.update(target_vlen=100), "target_vlen"),
}


@pytest.mark.parametrize("name", sorted(SCHEMA_CASES))
def test_schema_violation_is_one_artifact_error(art, name):
    edit, words = SCHEMA_CASES[name]
    bad = edited(art, edit)
    with pytest.raises(ArtifactError, match="meta") as e:
        bad.check_model()
    assert words in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ArtifactError):
        rvvkit.load(bad, on="host")


def test_valid_meta_passes_and_is_checked_once(art):
    fresh = Artifact.from_bytes(art.to_bytes())
    assert fresh.check_model() is fresh
    validate_meta(fresh.meta, len(fresh.weights))


LIBRARY_CASES = {
    "smaller-output": (lambda m: m["outputs"][0].update(shape=[2, 2]), "outputs[0]"),
    "input-of-1": (lambda m: m["inputs"][0].update(shape=[1]), "inputs[0]"),
    "output-type": (lambda m: m["outputs"][0].update(dtype="int64"), "outputs[0]"),
    "extra-output": (lambda m: m["outputs"].append(dict(m["outputs"][0], name="z2")),
                     "outputs: meta has 2"),
    "steps": (lambda m: m["plan"].pop(), "steps"),
    "arena": (lambda m: m["memory"].update(arena_floats=m["memory"]["arena_floats"] + 1),
              "arena_floats"),
}


@pytest.mark.parametrize("name", sorted(LIBRARY_CASES))
def test_meta_disagreeing_with_the_kernels_is_refused(art, name):
    edit, words = LIBRARY_CASES[name]
    bad = edited(art, edit)
    bad.check_model()  # well-formed: only the kernels can tell
    with pytest.raises(ArtifactError, match="disagree with the artifact's meta") as e:
        rvvkit.load(bad, on="host")
    assert words in str(e.value)


def test_cli_run_reports_an_edited_meta_in_one_line(art, tmp_path):
    bad = edited(art, LIBRARY_CASES["smaller-output"][0])
    path = tmp_path / "bad.rvv"
    bad.save(path)
    np.save(tmp_path / "x.npy", np.ones((2, 8), np.float32))
    proc = subprocess.run([sys.executable, "-m", "rvvkit", "run", str(path), "--inputs",
                           str(tmp_path / "x.npy"), "--output", str(tmp_path / "o.npz")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("rvvkit: error:") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr and not (tmp_path / "o.npz").exists()


def test_meta_keys_read_by_inspect_may_be_absent(art, tmp_path, capsys):
    from rvvkit.cli import main
    bad = edited(art, lambda m: [m.pop(k) for k in ("model", "producer", "macs", "kernels")])
    path = tmp_path / "lean.rvv"
    bad.save(path)
    assert main(["inspect", str(path)]) == 0
    assert "model '?'" in capsys.readouterr().out


def test_terminal_escapes_in_names_are_not_printed_raw(art, tmp_path, capsys):
    from rvvkit.cli import main
    bad = edited(art, lambda m: m["outputs"][0].update(name="z\x1b[2Jboom"))
    path = tmp_path / "esc.rvv"
    bad.save(path)
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "z\\x1b[2Jboom" in out


def test_check_keys_are_exact(art):
    data = bytearray(art.to_bytes())
    at = data.index(b'"meta_rvk64"')
    data[at + 1:at + 2] = b"M"
    with pytest.raises(ArtifactError, match="unknown key"):
        Artifact.from_bytes(bytes(data))
