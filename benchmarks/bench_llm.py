"""Decoders: numerics against onnxruntime, work per token under QEMU against llama.cpp, and
tokens/s on this machine against onnxruntime.

    python3 benchmarks/bench_llm.py numerics [--steps 64]
    python3 benchmarks/bench_llm.py counts [--config qwen2.5-0.5b] [--vlens 128,256,512,1024]
                                           [--forms int4,int8] [--llama | --llama-json F..]
                                           [--isa k1] [--peer-variant k1|fp32|both]
                                           [--precision fp32|fp16|auto] [--vl]
    python3 benchmarks/bench_llm.py host [--config qwen2.5-0.5b] [--forms int4,int8]
                                         [--threads 1,all] [--prompt 64] [--tokens 16]

numerics: the small decoders of rvvkit.zoo.llm (fp32, int4, int8; accuracy levels 0 and 4)
generate `--steps` greedy tokens on the host and under QEMU (VLEN 128); each row says whether
the tokens equal onnxruntime's and the largest logit difference over all steps.

counts: the decoder of `--config` at int4 (block 32) and int8 (block 32), both with int8
activations (accuracy_level 4, what onnxruntime-genai writes for CPUs and what llama.cpp's
Q4_0/Q8_0 kernels do), one thread, under QEMU at each VLEN: LMUL-weighted instructions (scalar
instructions + vector instructions x LMUL) per generated token and per prompt token, from the
difference of two runner --generate processes (so start-up and loading cancel; the prompts
differ by one whole prefill chunk, `--prefill N`, 16 by default). With --llama,
llama.cpp (benchmarks/peer_llama.py: its public source built for riscv64 + RVV) runs the same
configuration as GGUF at Q4_0 / Q8_0 under the same counter, and the table gains the ratio:
for each --peer-variant, llama.cpp at its K1 defaults ("k1": Zfh/Zvfh/Zicbop on, repacked
Q4_0/Q8_0 weights and 16x1 GEMV/GEMM kernels at VLEN 256, checked from its log) and plain RVV
("fp32": Zfh/Zvfh off, per-block dot products). Every run, rvvkit's and llama.cpp's, uses the
QEMU 7.2 -cpu of ISA profile --isa (default k1), and rvvkit is compiled for it; --precision is
passed to rvvkit's build where its builder has the option (fp32 otherwise).
Forms int4_f16 / int8_f16: the same decoder written in float16 (weights, scales, caches and
logits; what onnxruntime-genai's fp16 precision writes), quantized alike. Modelled K1
tokens/s: the lower of the cycle model (toolchain/boards/k1.toml, one core) and the memory
bound (weights + live KV cache bytes per token at 10.66 GB/s) -- a model, not a measurement.
With --vl every run is counted under the counting QEMU 10 (scripts/qemu_plugins.sh), which
adds two tables from the same runs: the elements vector instructions process per token
(VL-weighted), and one X60 core's modelled compute cycles per token from the class counts
(the K1 cost model of docs/cost-model.md); llama.cpp's --llama-json files must then come from
peer_llama.py --vl.

host: benchmarks/bench_llm_host.py (rvvkit's host executor against onnxruntime on the same
ONNX file, prompt and generation apart, one thread and every core)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import rvvkit  # noqa: E402
import bench_llm_host  # noqa: E402
import peer_rvvkit as R  # noqa: E402
from llm_forms import COUNT_FORMS, count_model  # noqa: E402
from rvvkit.measure import cycle_model  # noqa: E402
from rvvkit.zoo import llm as zoo_llm  # noqa: E402
from rvvkit.runtime.counting import icount, vcount  # noqa: E402
from rvvkit.measure.report import table  # noqa: E402

K1_BYTES_PER_S = 10.66e9
NUMERIC_FORMS = {
    "fp32": dict(),
    "int4": dict(bits=4, block=32),
    "int4-acc4": dict(bits=4, block=32, accuracy=4),
    "int8-zp": dict(bits=8, block=64, zero_points=True),
    "int8-acc4": dict(bits=8, block=32, accuracy=4),
}
def _qtype(form: str) -> str:
    return {"int4": "q4_0", "int8": "q8_0"}[form.split("_")[0]]


def numerics(steps: int) -> list:
    from ort_decoder import ort_greedy
    prompt, bound = [3, 14, 15, 9, 26], steps + 8
    rows = []
    for arch in ("qwen2-tiny", "llama-tiny"):
        for form, extra in NUMERIC_FORMS.items():
            model = zoo_llm.decoder(zoo_llm.replace(zoo_llm.SMALL[arch], **extra))
            want, ref = ort_greedy(model, prompt, steps, bound)
            art = rvvkit.build(model, max_seq=bound)
            for on, opts in (("host", {}), ("qemu", {"vlen": 128})):
                with rvvkit.load(art, on=on, **opts) as sess:
                    got = sess.generate(prompt, steps, keep_logits=True)
                diff = max(float(np.abs(a - b).max()) for a, b in zip(got.logits, ref))
                rows.append([arch, form, on, "yes" if got.tokens == want else "NO",
                             f"{diff:.2e}"])
    print(table(["model", "form", "executor", f"same {steps} tokens", "max |logit diff|"],
                rows, align="llllr"))
    return rows


def weighted(c) -> int:
    return cycle_model.weighted_instructions(c)


def _per_token(sess, prompt_lo: int, prompt_hi: int, gen_lo: int, gen_hi: int,
               vl: bool = False) -> dict:
    """Per generated and per prompt token counts from three runner --generate processes
    (with `vl`, under the counting QEMU 10: the VL-weighted elements too)."""
    base = sess.generation_counts([1] * prompt_lo, gen_lo, vl=vl)
    more_gen = sess.generation_counts([1] * prompt_lo, gen_hi, vl=vl)
    more_prompt = sess.generation_counts([1] * prompt_hi, gen_lo, vl=vl)
    keys = vcount.VL_KEYS if vl else icount.COUNT_KEYS

    def per(a, b, n):
        diff = {k: (b[k] - a[k]) / n for k in keys}
        if vl:
            import peer_llama as P
            diff["classes"] = P.per_token_classes(b["classes"], a["classes"], n)
        return dict(diff, weighted=weighted(diff))
    return {"gen": per(base, more_gen, gen_hi - gen_lo),
            "prompt": per(base, more_prompt, prompt_hi - prompt_lo)}


def _bytes_per_token(art, cfg, live: int) -> int:
    """Weights read per token + live KV: all the weights, but of a token table that is not
    also the LM head only one row."""
    row = cfg.hidden * cfg.bits // 8 + cfg.hidden // cfg.block * 2   # codes, 16-bit scales
    table = 0 if cfg.tied else (cfg.vocab - 1) * row
    kv = 2 * cfg.layers * cfg.kv_heads * cfg.head * 4 * live
    return int(art.meta["memory"]["weights_bytes"]) - table + kv


def llama_per_token(config: str, form: str, vlen: int, prompt, gen, variant: str = "fp32",
                    isa: str = "k1", vl: bool = False) -> dict:
    """llama.cpp's per-token counts for the same configuration (peer_llama.py), or a status."""
    import peer_llama as P
    import peer_llama_build as B
    name = {"qwen2-tiny": "small"}.get(config, config)
    if name not in P.CONFIGS:
        return {"status": f"no GGUF form of {config}"}
    qtype = _qtype(form)
    try:
        build = B.build_llama(variant=variant)
        gguf = B.DEFAULT_WORK / "models" / f"qwen2-{name}-{qtype}-s0.gguf"
        if not gguf.exists():
            P.write_gguf(gguf, P.CONFIGS[name], qtype)
        res = P.count_llama(build["driver"], gguf, prompt[0], gen[1] - gen[0], vlen, isa,
                            variant, vl)
    except B.PeerError as exc:
        return {"status": f"failed: {str(exc).splitlines()[0]}"}
    return {"gen": res["per_generated_token"], "prompt": res["per_prompt_token"],
            "commit": build["commit"], "qtype": qtype, "variant": variant,
            "repack": res["repack"]}


def llama_from_json(paths, form: str, vlen: int, variant: str = "fp32", isa: str = "",
                    vl: bool = False) -> dict:
    """llama.cpp's per-token counts from peer_llama.py --json files (instruction counts are
    exact and repeatable: a file from an earlier run of the same commit counts the same).
    Files older than --peer-variant hold the fp32 (plain RVV) build's rows, run without a
    profile; a file's profile must be `isa` when it names one. With `vl`, only rows counted
    VL-weighted (peer_llama.py --vl)."""
    qtype = _qtype(form)
    for path in paths:
        doc = json.loads(Path(path).read_text())
        if doc.get("qtype") != qtype or (isa and doc.get("isa", isa) != isa):
            continue
        for res in doc.get("results", []):
            if res.get("vlen") == vlen and res.get("variant", "fp32") == variant and \
                    "per_generated_token" in res and \
                    (not vl or "classes" in res["per_generated_token"]):
                return {"gen": res["per_generated_token"], "prompt": res["per_prompt_token"],
                        "commit": doc.get("llama_cpp_commit"), "qtype": qtype, "file": path,
                        "variant": variant, "repack": res.get("repack")}
    return {"status": f"no {variant} {qtype} VLEN {vlen}{' VL-weighted' if vl else ''} in "
                      "--llama-json"}


def rvvkit_from_json(path, form: str, vlen: int, isa: str, precision: str, prompt,
                     prefill: int, vl: bool = False):
    """rvvkit's per-token counts from an earlier `counts --json` file of the same form, VLEN,
    profile, precision, prompts and prefill (counts are exact: the same build counts the
    same), or None."""
    if not path:
        return None
    for d in json.loads(Path(path).read_text()):
        if (d["form"], d["vlen"], d.get("isa"), d.get("precision"), list(d["prompts"]),
                d["prefill_tokens"]) == (form, vlen, isa, precision, list(prompt), prefill) \
                and (not vl or "classes" in d["rvvkit"]["gen"]):
            return d["rvvkit"]
    return None


def prompt_lengths(art) -> tuple:
    """The two prompt lengths whose difference gives the per prompt token count: one whole
    prefill chunk apart (each prompt's last token runs alone, the rest in full chunks), or
    4 and 8 tokens for an artifact that runs prompts a token at a time."""
    pre = art.meta.get("prefill")
    return (pre["tokens"] + 1, 2 * pre["tokens"] + 1) if pre else (4, 8)


def counts(config: str, vlens, forms, use_llama: bool, gen=(2, 6), llama_json=(),
           prefill: int = 16, isa: str = "k1", variants=("k1", "fp32"),
           precision: str = "fp32", rvvkit_json=None, vl: bool = False) -> list:
    base = zoo_llm.SMALL[config]
    rows, doc = [], []
    k1 = cycle_model.board_model("k1")
    for form in forms:
        cfg = zoo_llm.replace(base, **COUNT_FORMS[form])
        t0 = time.perf_counter()
        art = R.build(count_model(cfg), precision, max_seq=min(cfg.max_seq, 256),
                      prefill=prefill)
        built = time.perf_counter() - t0
        prompt = prompt_lengths(art)
        size = int(art.meta["memory"]["weights_bytes"])
        for vlen in vlens:
            ours = rvvkit_from_json(rvvkit_json, form, vlen, isa, precision, prompt, prefill,
                                    vl)
            if ours is None:
                with rvvkit.load(art, on="qemu", vlen=vlen, threads=1, isa=isa) as sess:
                    ours = _per_token(sess, *prompt, *gen, vl=vl)
            peers = {}
            for v in variants if (llama_json or use_llama) else ():
                peers[v] = llama_from_json(llama_json, form, vlen, v, isa, vl) if llama_json \
                    else llama_per_token(config, form, vlen, prompt, gen, v, isa, vl)
            live = prompt[0] + gen[1]
            mem_tps = K1_BYTES_PER_S / _bytes_per_token(art, cfg, live)
            # the cycle model is the K1's: meaningful for runs at its VLEN only
            cyc_tps = k1.frequency_ghz * 1e9 / cycle_model.thread_cycles(ours["gen"], k1) \
                if vlen == k1.vlen else float("inf")
            line = [form, vlen]
            for kind in ("gen", "prompt"):
                line.append(f"{ours[kind]['weighted'] / 1e6:.2f}")
                for v in variants if (llama_json or use_llama) else ():
                    peer = peers.get(v) or {}
                    if peer.get(kind):
                        line += [f"{peer[kind]['weighted'] / 1e6:.2f}",
                                 f"{ours[kind]['weighted'] / peer[kind]['weighted']:.2f}"]
                    else:
                        line += [peer.get("status", "-"), "-"]
            line.append(f"{min(mem_tps, cyc_tps):.1f}" if vlen == k1.vlen else "-")
            rows.append(line)
            doc.append({"form": form, "vlen": vlen, "isa": isa, "precision": precision,
                        "rvvkit": ours, "llama": peers, "prompts": prompt,
                        "prefill_tokens": prefill, "build_s": built, "weights_bytes": size,
                        "k1_memory_tps": mem_tps, "k1_cycle_tps": cyc_tps})
    sizes = ", ".join(f"{d['form']} {d['weights_bytes']:,} bytes" for d in doc[::len(vlens)])
    print(f"{config}: weighted instructions per token (millions), one thread, QEMU "
          f"(ISA profile {isa}); rvvkit {precision}; "
          f"weights {sizes}; rvvkit's prompts {prompt[0]} and {prompt[1]} tokens"
          + (f" (prefill chunks of {prefill})" if prefill > 1 else " (a token at a time)"))
    names = {"k1": "llama.cpp K1 default",
             "fp32": "llama.cpp plain RVV (Zfh/Zvfh off: a core without them)"}
    heads = ["form", "VLEN"]
    for kind in ("gen token", "prompt token"):
        heads.append(f"rvvkit / {kind}")
        for v in variants if (llama_json or use_llama) else ():
            heads += [names[v], "ratio"]
    heads.append("K1 tokens/s (model)")
    print(table(heads, rows, align="lr" + "r" * (len(heads) - 2)))
    if vl:
        _vl_table(doc, variants if (llama_json or use_llama) else (), names)
    return doc


def _x60_cycles(counts: dict) -> float:
    """Modelled cycles of one X60 core (class_model with toolchain/cost/x60.toml: compute
    only, a MODEL) for per-token class counts."""
    from rvvkit.measure.class_model import class_cycles
    from rvvkit.measure.cost_table import cost_table
    return class_cycles(counts["classes"], cost_table("x60"))["cycles"]


def _vl_table(doc, variants, names) -> None:
    """From the same runs: the elements vector instructions process per token (VL-weighted;
    scalar instructions not included), and one X60 core's modelled compute cycles per token
    (the K1 cost model's class table; memory not included), with their ratios."""
    for title, figure in (
            ("VL-weighted: millions of vector elements processed per token (vl summed over "
             "vector instructions)", lambda c: c["vl_weighted_vector_ops"]),
            ("K1 cost model (LLVM's X60 table, compute only, one core; a MODEL: "
             "docs/cost-model.md): millions of modelled cycles per token", _x60_cycles)):
        heads, rows = ["form", "VLEN"], []
        for kind in ("gen token", "prompt token"):
            heads.append(f"rvvkit / {kind}")
            for v in variants:
                heads += [names[v], "ratio"]
        for d in doc:
            line = [d["form"], d["vlen"]]
            for kind in ("gen", "prompt"):
                ours = figure(d["rvvkit"][kind])
                line.append(f"{ours / 1e6:.2f}")
                for v in variants:
                    peer = (d["llama"].get(v) or {}).get(kind) or {}
                    line += [f"{figure(peer) / 1e6:.2f}", f"{ours / figure(peer):.2f}"] \
                        if "classes" in peer else ["-", "-"]
            rows.append(line)
        print(f"\n{title}, same runs")
        print(table(heads, rows, align="lr" + "r" * (len(heads) - 2)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    n = sub.add_parser("numerics")
    n.add_argument("--steps", type=int, default=64)
    c = sub.add_parser("counts")
    c.add_argument("--config", default="qwen2-tiny", choices=sorted(zoo_llm.SMALL))
    c.add_argument("--vlens", default="128,256,512,1024")
    c.add_argument("--forms", default="int4,int8")
    c.add_argument("--llama", action="store_true", help="count llama.cpp too (peer_llama.py)")
    c.add_argument("--llama-json", nargs="+", default=(), metavar="FILE",
                   help="llama.cpp's counts from peer_llama.py --json files instead of "
                        "running it (a 0.5B run takes 7 minutes per quantization)")
    c.add_argument("--prefill", type=int, default=16, metavar="N",
                   help="prompt tokens per prefill call (rvvkit build --prefill; 0: a token "
                        "at a time)")
    c.add_argument("--isa", default="k1",
                   help="ISA profile (toolchain/isa/) of every QEMU run and rvvkit build (k1)")
    c.add_argument("--peer-variant", choices=("k1", "fp32", "both"), default="both",
                   help="llama.cpp at its K1 defaults, plain RVV, or both (default)")
    c.add_argument("--precision", choices=R.PRECISIONS, default="fp32",
                   help="rvvkit's build precision, where its builder has the option (fp32)")
    c.add_argument("--rvvkit-json", metavar="FILE",
                   help="rvvkit's counts from an earlier --json file where it has the same "
                        "form, VLEN, profile, precision and prompts (else counted)")
    c.add_argument("--vl", action="store_true",
                   help="count under the counting QEMU 10 (scripts/qemu_plugins.sh): also the "
                        "VL-weighted elements per token, rvvkit's and llama.cpp's")
    c.add_argument("--json", help="write the figures here")
    bench_llm_host.add_arguments(sub.add_parser(
        "host", help="tokens/s on this machine against onnxruntime (bench_llm_host.py)"))
    args = p.parse_args(argv)
    if args.what == "host":
        return bench_llm_host.run(args)
    if args.what == "numerics":
        rows = numerics(args.steps)
        return 0 if all(r[3] == "yes" for r in rows) else 1
    try:
        R.build_kwargs(args.precision)
    except R.PrecisionUnsupported as exc:
        print(f"bench_llm: error: {exc}", file=sys.stderr)
        return 1
    variants = {"both": ("k1", "fp32")}.get(args.peer_variant, (args.peer_variant,))
    doc = counts(args.config, [int(v) for v in args.vlens.split(",")],
                 args.forms.split(","), args.llama, llama_json=args.llama_json,
                 prefill=args.prefill, isa=args.isa, variants=variants,
                 precision=args.precision, rvvkit_json=args.rvvkit_json, vl=args.vl)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
