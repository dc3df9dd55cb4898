"""How many CUDA model objects one process can hold: N distinct shared objects of one small
model (copies of one nvcc build at N paths, so each is a separate library with its own CUDA
runtime when that is linked statically), each opened as a session, run and checked, and all
kept open; once with nvcc's default static runtime and once with `-cudart shared`.

    python3 benchmarks/cuda_objects.py [--count 64] [--emulate]

Prints per link mode: how many loaded and matched, the first failure, the resident memory
the process grew by and the mean time to open one session. Needs a GPU (or --emulate, which
checks the script; the emulator's objects have no CUDA runtime)."""
from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from host_env import say  # noqa: I100 - finds rvvkit first

import numpy as np
from onnx import TensorProto, helper

import rvvkit
from rvvkit.jit import nvcc as jit_nvcc
from rvvkit.runtime import cuda as cuda_runtime


def model():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    graph = helper.make_graph(nodes, "objects",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def hold(art, objects: List[Path], emulate: bool) -> Dict:
    """Open a session on each object (all kept open), run it, check it."""
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)
    want = np.maximum(x, 0) + x
    paths = iter(objects)
    build = "compile_cu_emulated" if emulate else "compile_cu"
    real = getattr(cuda_runtime, build)
    setattr(cuda_runtime, build, lambda *a, **k: next(paths))
    sessions, res = [], {"count": len(objects), "ok": 0, "first_failure": ""}
    rss0, t0 = rss_mib(), time.perf_counter()
    try:
        for i in range(len(objects)):
            try:
                sess = rvvkit.load(art, on="cuda-emu" if emulate else "cuda")
                sessions.append(sess)
                if not np.allclose(sess.run({"x": x})["y"], want):
                    raise AssertionError("wrong output")
                res["ok"] += 1
            except Exception as exc:  # noqa: BLE001 - the first failure is the finding
                res["first_failure"] = f"object {i + 1}: {type(exc).__name__}: {exc}"[:300]
                break
    finally:
        setattr(cuda_runtime, build, real)
    res["open_ms"] = 1e3 * (time.perf_counter() - t0) / max(len(sessions), 1)
    res["rss_mib"] = rss_mib() - rss0
    for sess in sessions:
        sess.close()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=64)
    ap.add_argument("--emulate", action="store_true")
    args = ap.parse_args(argv)
    art = rvvkit.build(model())
    tmp = Path(tempfile.mkdtemp(prefix="rvvkit-objects-"))
    modes = {"emulated": None} if args.emulate else {"static cudart": [],
                                                      "-cudart shared": ["-cudart", "shared"]}
    ok = True
    for mode, extra in modes.items():
        if extra is None:
            one = jit_nvcc.compile_cu_emulated(art.cu_source)
        else:
            one = jit_nvcc.compile_cu(art.cu_source,
                                      flags=jit_nvcc.nvcc_flags(native=True) + extra)
        objects = []
        for i in range(args.count):
            objects.append(tmp / f"{mode.strip('-').replace(' ', '_')}_{i}.so")
            shutil.copy(one, objects[-1])
        res = hold(art, objects, args.emulate)
        ok &= res["ok"] == args.count
        say(f"{mode}: {res['ok']} of {res['count']} objects held and matched; "
            f"{res['rss_mib']:.0f} MiB resident added, {res['open_ms']:.1f} ms to open each"
            + (f"; first failure: {res['first_failure']}" if res["first_failure"] else ""))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
