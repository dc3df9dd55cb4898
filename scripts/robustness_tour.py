"""Replays the defects of the robustness review (issue 12) against this checkout and prints,
for each, the command and what it now gives: exit code and the first line of stderr. Every
line should read as one clear error (exit 1, 2, 3 or 4), never a traceback or a signal.

    python3 scripts/robustness_tour.py [WORKDIR]

The tests cover each case; this is the same list in the words of a user at a shell."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from conftest import make_model, rand  # noqa: E402

import rvvkit  # noqa: E402
from rvvkit.artifact import Artifact  # noqa: E402

PY = [sys.executable, "-m", "rvvkit"]


def show(what: str, argv, env=None) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("rvvkit: no --inputs")]
    first = next((ln for ln in lines if "error" in ln or "runner:" in ln), lines[-1] if lines
                 else "")
    bad = "Traceback" in proc.stderr or proc.returncode < 0
    print(f"{'BAD ' if bad else ''}{what}\n  $ {shlex.join(map(str, argv))[-160:]}\n"
          f"  -> exit {proc.returncode}: {first[:220]}\n")


def edited(art: Artifact, path: Path, edit) -> Path:
    meta = json.loads(json.dumps(art.meta))
    edit(meta)
    Artifact(meta, art.c_source, art.weights, art.cu_source).save(path)  # checksums redone
    return path


def main(work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
                        helper.make_node("Relu", ["y"], ["z"])],
                       [("x", (1, 3, 6, 6))], [("z", (1, 4, 6, 6))], {"w": rand(4, 3, 3, 3)})
    onnx.save(model, work / "m.onnx")
    art = rvvkit.build(model, cuda=False)
    art.save(work / "m.rvv")
    np.save(work / "x.npy", np.ones((1, 3, 6, 6), np.float32))
    run = PY + ["run"]

    print("== edited meta, checksums recomputed ==")
    for name, edit in [("outputs dropped", lambda m: m.pop("outputs")),
                       ("inputs dropped", lambda m: m.pop("inputs")),
                       ("smaller output shape", lambda m: m["outputs"][0].update(shape=[1, 2])),
                       ("input shape [1]", lambda m: m["inputs"][0].update(shape=[1])),
                       ("plan step not an object", lambda m: m["plan"].append(7))]:
        path = edited(art, work / "edited.rvv", edit)
        show(f"{name} (host)", run + [path])
        show(f"{name} (QEMU runner)", run + [path, "--on", "qemu"])

    print("== the C runner verifies its artifact ==")
    data = bytearray((work / "m.rvv").read_bytes())
    weights = next(s for s in art.sections() if s["name"] == ".rvvkit.weights")
    data[weights["offset"] + 5] ^= 0x10
    (work / "flip.rvv").write_bytes(bytes(data))
    show("a weight bit flipped (Python reader)", run + [work / "flip.rvv"])
    show("a weight bit flipped (the runner alone)", [_runner(work), work / "flip.rvv",
                                                       _kernels(art), "--inputs", work / "x.npy"])

    print("== a planted cache entry ==")
    show("cache directory writable by others", run + [work / "m.rvv"],
         env=dict(os.environ, RVVKIT_CACHE_DIR=_world_writable(work)))

    print("== output names ==")
    for bad in ("allow_pickle", "file", "../../x", "esc\x1b[2Jape"):
        m = make_model([helper.make_node("Relu", ["x"], [bad])], [("x", (1, 4))], [bad])
        onnx.save(m, work / "n.onnx")
        subprocess.run(PY + ["build", work / "n.onnx", "-o", work / "n.rvv", "-q"], check=True)
        out = work / "n.npz"
        show(f"output named {bad!r}", run + [work / "n.rvv", "--output", out])
        with zipfile.ZipFile(out) as z:
            print(f"  archive members: {z.namelist()}\n")

    print("== inputs and settings ==")
    (work / "empty.npz").write_bytes(b"")
    (work / "pk.npz").write_bytes(b"PK\x03\x04garbage")
    with open(work / "npy.npz", "wb") as f:  # a .npy under a .npz name (np.save adds .npy)
        np.save(f, np.ones(3, np.float32))
    for name in ("empty.npz", "pk.npz", "npy.npz"):
        show(f"--inputs {name}", run + [work / "m.rvv", "--inputs", work / name])
    show("RVVKIT_COMPILE_TIMEOUT=abc", run + [work / "m.rvv", "--no-cache"],
         env=dict(os.environ, RVVKIT_COMPILE_TIMEOUT="abc"))
    show("RVVKIT_COMPILER=\"gcc 'oops\"", run + [work / "m.rvv", "--no-cache"],
         env=dict(os.environ, RVVKIT_COMPILER="gcc 'oops"))
    show("missing artifact", run + [work / "nope.rvv"])

    print("== invalid models ==")
    bad_models = {
        "strides 0": make_model([helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 0])],
                                [("x", (1, 3, 6, 6))], ["y"], {"w": rand(4, 3, 3, 3)}),
        "kernel_shape 0": make_model([helper.make_node("MaxPool", ["x"], ["y"],
                                                       kernel_shape=[0, 0])],
                                     [("x", (1, 3, 6, 6))], ["y"]),
        "two producers": make_model([helper.make_node("Relu", ["x"], ["y"]),
                                     helper.make_node("Neg", ["x"], ["y"])],
                                    [("x", (1, 4))], ["y"]),
        "dim -5": make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", (1, -5))], ["y"]),
    }
    bad_models["opset 9999"] = make_model([helper.make_node("Relu", ["x"], ["y"])],
                                          [("x", (1, 4))], ["y"], opset=9999)
    for name, m in bad_models.items():
        path = work / "bad.onnx"
        path.write_bytes(m.SerializeToString())
        show(name, PY + ["build", path, "-o", work / "bad.rvv"])


def _runner(work: Path) -> str:
    from rvvkit.jit import resolve_compiler
    from rvvkit.runtime.runner import build_runner
    return str(build_runner(resolve_compiler(target="host")))


def _kernels(art: Artifact) -> str:
    from rvvkit.jit import resolve_compiler
    from rvvkit.runtime.runner import build_kernels
    return str(build_kernels(art.c_source, resolve_compiler(target="host")))


def _world_writable(work: Path) -> str:
    path = work / "shared-cache"
    path.mkdir(exist_ok=True)
    os.chmod(path, 0o777)
    return str(path)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="tour-")))
