"""llama.cpp on this host as a peer of rvvkit's host executor (a benchmark tool: rvvkit never
imports it): llama.cpp at peer_llama_build.LLAMA_COMMIT built the way its users build it on a
PC (CMake defaults: Release, GGML_NATIVE=ON, so -march=native and its AVX2 / AVX-512 / VNNI
kernels, OpenMP on), its own `llama-bench` timing the GGUF of peer_llama.write_gguf (the same
Qwen2 shape and quantization scope as rvvkit's int4 / int8 files: every matrix and the tied token
table in Q4_0 / Q8_0; the weights are other random draws).

    from peer_llama_host import build_host, llama_bench
    exe = build_host()                      # cached under ~/.cache/rvvkit-peer-llama/host
    pp, tg = llama_bench(exe, gguf, prompt=64, gen=16, threads=1)   # tokens/s
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Tuple

import peer_llama_build as B
from peer_ncnn_build import PeerError, _stamp_ok

HOST_OPTS = ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF",
             "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_OPENSSL=OFF",
             "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_BUILD_APP=OFF"]


def build_host(work: Path = B.DEFAULT_WORK, jobs: int = 2) -> Path:
    """llama-bench for this machine (cached by a stamp of the commit and options)."""
    work = Path(work)
    src = B.fetch_source(work)
    build = work / "host"
    exe = build / "bin" / "llama-bench"
    key = {"commit": B.LLAMA_COMMIT, "opts": HOST_OPTS}
    stamp = build / ".peer-stamp"
    if exe.is_file() and _stamp_ok(stamp, key):
        return exe
    B.cmake_build(src, build, HOST_OPTS, "llama-bench", jobs, "this host")
    stamp.write_text(json.dumps(key))
    return exe


def llama_bench(exe: Path, gguf: Path, prompt: int, gen: int, threads: int,
                reps: int = 1) -> Tuple[float, float]:
    """(prompt tokens/s, generation tokens/s) by llama-bench: a `prompt`-token batch from an
    empty context, and `gen` single tokens from an empty context, each after its own warm-up
    run, averaged over `reps` repetitions."""
    argv = [str(exe), "-m", str(gguf), "-p", str(prompt), "-n", str(gen), "-t", str(threads),
            "-r", str(reps), "-o", "json"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise PeerError(f"llama-bench failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    rows = json.loads(proc.stdout)
    pp = [r["avg_ts"] for r in rows if r.get("n_prompt") and not r.get("n_gen")]
    tg = [r["avg_ts"] for r in rows if r.get("n_gen") and not r.get("n_prompt")]
    if not pp or not tg:
        raise PeerError(f"llama-bench printed no pp/tg rows: {proc.stdout[:400]}")
    return float(pp[0]), float(tg[0])
