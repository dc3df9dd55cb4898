"""Calibration of the K1 cost model (rvvkit/measure/class_model.py, toolchain/cost/x60.toml,
toolchain/boards/k1.toml [model]) against published SpacemiT K1 figures.

    python3 benchmarks/calibrate_k1.py [--wait 30] [--json out.json]
    python3 benchmarks/calibrate_k1.py --counts ~/.cache/rvvkit-calibrate-k1/counts.json

Each published point names the workload a K1 ran; this script counts the same work under QEMU
(VLEN 256, the K1's ISA profile: toolchain/isa/k1.toml) with rvvkit's class-counting plugin
(rvvkit.runtime.counting.iclass), runs the counts and the bytes the step moves through the model at
the published thread count, and prints modelled against published with the error
(modelled / published - 1) and the source. The model is accepted where every point it can run
lands within +-35 %.

llama.cpp points: llama.cpp is built by benchmarks/peer_llama_build.py (variant "k1": its own
RISC-V defaults, repacked Q4_0 GEMV/GEMM; variant "fp32": plain RVV, per-block dot products);
this script never builds it, it waits (--wait minutes) for that script's stamp files. A
TinyLlama-1.1B-shaped GGUF (hidden 2048, 32 heads, 4 KV heads, FFN 5632, vocab 32000, seeded
random Q4_0 weights, peer_llama.write_gguf; Qwen2 layout, so q/k/v carry biases TinyLlama lacks)
is counted with 1 and 2 layers; per token = count(1) + 21 x (count(2) - count(1)), each count a
difference of two driver runs as peer_llama.py takes them (start-up and loading cancel). The
driver runs one thread: the work is split evenly over the published thread count (thread
synchronisation is not modelled). Bytes per generated token: TinyLlama's matrices as its
published GGUFs store them (4.5 bits a weight for Q4_0 and IQ4_NL, the output matrix Q6_K at
6.5625) plus the live K/V cache in f16.

Counting takes minutes per run (the class plugin calls back on every instruction); counts are
saved to --save (default ~/.cache/rvvkit-calibrate-k1/counts.json) and reused with --counts."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from rvvkit.measure import cycle_model  # noqa: E402
from rvvkit.measure.class_model import modelled_step  # noqa: E402
from rvvkit.measure.report import table  # noqa: E402

CACHE = Path.home() / ".cache" / "rvvkit-calibrate-k1"
TINYLLAMA = dict(vocab=32000, hidden=2048, heads=32, kv_heads=4, layers=22, intermediate=5632,
                 rope_theta=10000.0, eps=1e-5)
BITS = {"q4_0": 4.5, "iq4_nl": 4.5, "q8_0": 8.5, "q6_k": 6.5625}

# Published K1 points. `workload` says what is counted in their place, `doubt` what the source
# leaves open.
POINTS = [
    dict(key="tinyllama-q4-tg-blog", what="llama.cpp TinyLlama-1.1B, generated tokens/s",
         published=8.29, unit="tokens/s", threads=8, variant="k1", quant="q4_0", kind="gen",
         source="bruno.verachten.fr 2026-02-27, 'Running a Local LLM on RISC-V ... Banana Pi F3 "
                "(Part 1)': ~8.5 tokens/s, 8.29 in llama-bench",
         doubt="quantization and threads not in the part read: modelled as Q4_0 with "
               "llama.cpp's K1 defaults (repacked GEMV), 8 threads (llama-bench's default: "
               "all cores)"),
    dict(key="tinyllama-iq4nl-tg-pr18859", what="llama.cpp TinyLlama-1.1B IQ4_NL, tg10",
         published=7.94, unit="tokens/s", threads=8, variant="fp32", quant="iq4_nl", kind="gen",
         source="ggml-org/llama.cpp PR 18859 (BPI-F3, llama-bench, prompt 32, 10 tokens)",
         doubt="IQ4_NL's vec-dot kernel counted as Q4_0's per-block dot product (plain-RVV "
               "build, the path before repacking); threads not stated: 8 (llama-bench's "
               "default)"),
    dict(key="tinyllama-iq4nl-pp-pr18859", what="llama.cpp TinyLlama-1.1B IQ4_NL, pp32",
         published=9.72, unit="tokens/s", threads=8, variant="fp32", quant="iq4_nl",
         kind="prompt",
         source="ggml-org/llama.cpp PR 18859 (BPI-F3, llama-bench, prompt 32)",
         doubt="as above; prompt batches of 8 counted, not 32"),
]
UNRUN = [  # published K1 figures this script cannot count, and why
    ("SpacemiT onnxruntime yolov8n int8 640x640: 76 ms on 4 cores, 211 ms on 1",
     "runs SpacemiT's IME matrix extension (vendor, not emulated) in their build"),
    ("llama.cpp Qwen2.5-0.5B Q4_0 on 4 cores: 10.0 tokens/s (PR 15288)",
     "uses SpacemiT's IME matrix instructions"),
    ("benchncnn rows for K1 (squeezenet, mobilenet, resnet)",
     "none found in the sources searched (ncnn issues and PRs, pages)"),
]


def log(msg: str) -> None:
    print(f"[calibrate_k1] {msg}", file=sys.stderr, flush=True)


def wait_for_build(variant: str, minutes: float) -> dict:
    """peer_llama_build's finished build of `variant` (libraries and driver stamped), polled
    for up to `minutes`; never started here (another run of that script owns it)."""
    import peer_llama_build as B
    build = B.DEFAULT_WORK / B.VARIANTS[variant]["build"]
    driver = build / "bin" / "llama-peer-driver"
    ready = [build / ".peer-stamp", build / "bin" / ".peer-driver-stamp", driver,
             *[build / lib for lib in B.LIBS]]
    deadline = time.time() + minutes * 60
    while not all(p.exists() for p in ready):
        if time.time() > deadline:
            missing = [str(p) for p in ready if not p.exists()]
            raise RuntimeError(f"llama.cpp build {variant!r} not ready after {minutes:g} min "
                               f"(run benchmarks/peer_llama_build.py; missing {missing[0]})")
        log(f"waiting for llama.cpp ({variant}) at {build}")
        time.sleep(30)
    return {"driver": driver, "variant": variant}


def qemu_k1(vlen: int = 256) -> list:
    """qemu-riscv64 for a K1: rvvkit's -cpu string plus the K1 profile's QEMU 7.2 properties
    (Zfh; QEMU 7.2 runs Zvfh code unchecked)."""
    from rvvkit.jit import isa, targets
    rv = targets.riscv()
    return [rv.qemu_binary, "-L", rv.sysroot, "-cpu",
            rv.cpu_string(vlen) + isa.profile("k1").qemu_props("qemu7")]


def class_run(driver, gguf, n_prompt: int, n_gen: int, n_ctx: int) -> dict:
    """One llama.cpp driver run under the class-counting plugin: its class counts."""
    from rvvkit.runtime.counting import iclass
    with tempfile.TemporaryDirectory(prefix="calibrate-k1-") as tmp:
        out = Path(tmp) / "classes.json"
        argv = [*qemu_k1(), *iclass.qemu_class_args(out), str(driver), str(gguf),
                str(n_prompt), str(n_gen), str(n_ctx)]
        t0 = time.time()
        proc = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=7200)
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"driver failed (exit {proc.returncode}): {' '.join(argv)}\n"
                               + proc.stderr.decode(errors="replace")[-2000:])
        log(f"counted p{n_prompt} g{n_gen} of {Path(gguf).name} in {time.time() - t0:.0f} s")
        return iclass.read_classes(out)


def _scaled(a: dict, b: dict, k: float, n: float) -> dict:
    """(a + k x b) / n, class by class and key by key."""
    out: dict = {}
    for src, f in ((a, 1.0), (b, k)):
        for cls, keys in src.items():
            for key, v in keys.items():
                out.setdefault(cls, {})[key] = out.get(cls, {}).get(key, 0.0) + f * v / n
    return out


def per_token_classes(build: dict, quant: str, kinds=("gen", "prompt"), prompt: int = 8,
                      gen: int = 2) -> dict:
    """Class counts of one TinyLlama token of each of `kinds` ("gen", "prompt"), from 1- and
    2-layer models: count(1) + 21 x (count(2) - count(1))."""
    import peer_llama as P
    from rvvkit.runtime.counting.iclass import class_difference
    qtype = {"iq4_nl": "q4_0"}.get(quant, quant)   # the GGUF writer knows Q4_0 and Q8_0
    g0 = P.G0
    n_ctx = 256
    by_layers = {}
    for layers in (1, 2):
        cfg = dict(TINYLLAMA, layers=layers)
        gguf = CACHE / "models" / f"tinyllama-shape-l{layers}-{qtype}.gguf"
        if not gguf.exists():
            gguf.parent.mkdir(parents=True, exist_ok=True)
            P.write_gguf(gguf, cfg, qtype)
        base = class_run(build["driver"], gguf, prompt, g0, n_ctx)
        runs = {"gen": ((prompt, g0 + gen), gen), "prompt": ((2 * prompt, g0), prompt)}
        by_layers[layers] = {}
        for kind in kinds:
            (p, g), n = runs[kind]
            more = class_run(build["driver"], gguf, p, g, n_ctx)
            by_layers[layers][kind] = _scaled(class_difference(more, base)["classes"], {}, 0, n)
    out = {}
    for kind in kinds:
        one, two = by_layers[1][kind], by_layers[2][kind]
        layer = _scaled(two, one, -1.0, 1.0)                 # count(2) - count(1)
        out[kind] = _scaled(one, layer, TINYLLAMA["layers"] - 1, 1.0)
    return out


def tinyllama_bytes(quant: str, live: int = 40) -> float:
    """Bytes one generated token reads: every matrix of the 22 layers at `quant`, the output
    matrix at Q6_K, one token-table row, and the live f16 K/V cache."""
    c = TINYLLAMA
    head = c["hidden"] // c["heads"]
    layer = (2 * c["hidden"] ** 2 + 2 * c["hidden"] * head * c["kv_heads"]
             + 3 * c["hidden"] * c["intermediate"])
    weights = c["layers"] * layer * BITS[quant] / 8 + c["vocab"] * c["hidden"] * BITS["q6_k"] / 8
    kv = 2 * c["layers"] * c["kv_heads"] * head * 2 * live
    return weights + c["hidden"] * BITS[quant] / 8 + kv


def model_point(point: dict, classes: dict, k1) -> dict:
    """Modelled tokens/s of a point from its per-token class counts."""
    threads = point["threads"]
    kind = point["kind"]
    # a prompt token's weights are read once per batch: their bytes spread over the batch
    batch = 32 if kind == "prompt" else 1
    step = modelled_step(classes[kind], k1.table, k1.frequency_ghz, k1.memory,
                         tinyllama_bytes(point["quant"]) / batch, [1.0 / threads] * threads)
    modelled = 1e3 / step["modelled_ms"]
    return {"modelled": modelled, "error": modelled / point["published"] - 1,
            "bound": step["bound"], "compute_ms": step["compute_ms"],
            "memory_ms": step["memory_ms"], "bound_by": step["bound_by"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wait", type=float, default=30, help="minutes to wait for each build")
    ap.add_argument("--counts", type=Path, help="class counts saved by an earlier run")
    ap.add_argument("--save", type=Path, default=CACHE / "counts.json")
    ap.add_argument("--json", type=Path, help="write the table here")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv)
    k1 = cycle_model.board_model("k1")
    counts = json.loads(a.counts.read_text()) if a.counts else {}
    rows, doc = [], []
    for point in POINTS:
        ckey = f"{point['variant']}-{point['quant']}-{point['kind']}"
        res = {"point": point}
        try:
            if ckey not in counts:
                build = wait_for_build(point["variant"], a.wait)
                counts[ckey] = per_token_classes(build, point["quant"], (point["kind"],))
                a.save.parent.mkdir(parents=True, exist_ok=True)
                a.save.write_text(json.dumps(counts))
            res.update(model_point(point, counts[ckey], k1))
            rows.append([point["what"], f"{point['threads']}", f"{point['published']:g}",
                         f"{res['modelled']:.2f}", f"{100 * res['error']:+.0f} %",
                         "yes" if abs(res["error"]) <= 0.35 else "NO",
                         f"{res['bound']} ({res['compute_ms']:.0f} / {res['memory_ms']:.0f} ms)"])
        except (RuntimeError, OSError) as exc:
            res["status"] = str(exc).splitlines()[0]
            rows.append([point["what"], f"{point['threads']}", f"{point['published']:g}", "-",
                         "-", "not run", res["status"][:60]])
        doc.append(res)
    print(f"K1 cost model ({k1.table.name}, {k1.frequency_ghz:g} GHz, memory "
          f"{k1.memory.bytes_per_s(1) / 1e9:.2f} GB/s one core, "
          f"{k1.memory.bytes_per_s(k1.memory.cores) / 1e9:.2f} all) against published K1 "
          "figures (tokens/s; error = modelled / published - 1; accepted within +-35 %)")
    print(table(["point", "threads", "published", "modelled", "error", "within 35 %",
                 "bound (compute / memory per token)"], rows, align="lrrrrll"))
    for i, point in enumerate(POINTS, 1):
        print(f"  [{i}] {point['source']}; {point['doubt']}")
    print("Not run:")
    for what, why in UNRUN:
        print(f"  - {what}: {why}")
    ran = [r for r in doc if "error" in r]
    verdict = ran and all(abs(r["error"]) <= 0.35 for r in ran)
    print(f"Accepted: {'yes' if verdict else 'no'} ({len(ran)} of {len(POINTS)} points run)")
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
