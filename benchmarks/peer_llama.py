"""Peer benchmark: llama.cpp's RVV CPU backend under QEMU (RVV 1.0), by exact instruction counts.

    python3 benchmarks/peer_llama.py --config small --qtype q4_0 --vlen 256
    python3 benchmarks/peer_llama.py --config qwen2.5-0.5b --qtype q8_0 --vlen 256 --prompt 4 --gen 2
    python3 benchmarks/peer_llama.py --config small --qtype q8_0 --vlen 128 512 1024 --json out.json
    python3 benchmarks/peer_llama.py --config qwen2.5-0.5b --qtype q4_0 --peer-variant k1 --isa k1

--peer-variant: "k1" is llama.cpp built with its own RISC-V defaults (Zfh, Zvfh, Zicbop,
Zihintpause on: peer_llama_build.VARIANTS), as a K1 user builds it: at VLEN 256 its Q4_0/Q8_0
weights are repacked at load into a CPU_REPACK buffer and its 16x1 RVV GEMV/GEMM kernels run.
The driver runs verbose and the script reads its log: a k1 run at VLEN 256 whose log shows no
CPU_REPACK model buffer and no repacked tensor is an error, not a row. "fp32" is the plain-RVV
build (Zfh/Zvfh/Zicbop off): the per-block dot products of arch/riscv/quants.c. "both" (the
default) counts the two in one run. --isa names the ISA profile (toolchain/isa/) whose QEMU 7.2
-cpu properties every run gets (default k1: Zfh=true, Zba/Zbb/Zbs; QEMU 7.2 runs Zvfh code
without a property for it).

The model is a Qwen2-architecture GGUF with seeded random weights (write_gguf): the 2-D weight
matrices, token embedding included (it is also the tied output head), in Q4_0 or Q8_0, norms
and q/k/v biases in float32, and a byte-level "gpt2" vocabulary. llama.cpp (pinned commit,
peer_llama_build.py) runs it through a small driver on one thread: decode a batch of P fixed
token ids, then G single tokens, each sampled greedily. rvvkit's QEMU plugin
(rvvkit.runtime.counting.icount) counts three runs, (P, g0), (P, g0 + G) and (2P, g0) with g0 = 2:

    per generated token = (count(P, g0 + G) - count(P, g0)) / G
    per prompt token    = (count(2P, g0) - count(P, g0)) / P     (prompt decoded as one batch)

"raw" = every dynamic instruction; "weighted" = insns - vector_insns + lmul_weighted_vector_ops
(each vector instruction counted as its LMUL register-group size), as in peer_ncnn.py.
Each run's logits after the prompt are checked against a numpy forward pass over the same
dequantized weights (configs up to --ref-max-params; larger ones are only cross-checked).
--vl counts every run under rvvkit's counting QEMU 10 (scripts/qemu_plugins.sh) with the
profile as QEMU 10 spells it: the same LMUL-weighted counts, plus the elements vector
instructions process (vl_weighted_vector_ops) and the class x LMUL x SEW table per token that
bench_llm.py counts --vl puts through the K1 cost model.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import peer_llama_build as B  # noqa: E402

CONFIGS = {
    "small": dict(vocab=256, hidden=64, heads=4, kv_heads=2, layers=2, intermediate=128,
                  rope_theta=10000.0, eps=1e-6),
    "qwen2.5-0.5b": dict(vocab=151936, hidden=896, heads=14, kv_heads=2, layers=24,
                         intermediate=4864, rope_theta=1e6, eps=1e-6),
    # TinyLlama-1.1B's shape (Llama-2 architecture). write_gguf writes a Qwen2-architecture
    # GGUF, so it also gets q/k/v biases (TinyLlama has none): a few thousand extra additions
    # per token against ~1e9 multiply-adds, and the same matrices.
    "tinyllama-1.1b": dict(vocab=32000, hidden=2048, heads=32, kv_heads=4, layers=22,
                           intermediate=5632, rope_theta=10000.0, eps=1e-5),
}
QTYPES = ("q4_0", "q8_0")
G0 = 2  # generated tokens of the shorter runs


def _gguf():
    try:
        import gguf
    except ImportError:
        raise B.PeerError("the gguf package is missing: pip install gguf") from None
    return gguf


def _byte_chars() -> list:
    """GPT-2's byte-level alphabet: the printable character standing for each byte 0..255."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


def _weights(cfg: dict, seed: int):
    """(name, float32 array in numpy [rows, cols] order, quantize?) in GGUF tensor order."""
    rng = np.random.default_rng(seed)
    h, v, f = cfg["hidden"], cfg["vocab"], cfg["intermediate"]
    d = h // cfg["heads"]
    kv = d * cfg["kv_heads"]

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(cols)).astype(
            np.float32)

    def vec(n, base, scale):
        return (base + scale * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    yield "token_embd.weight", rng.standard_normal((v, h), dtype=np.float32), True
    yield "output_norm.weight", vec(h, 1.0, 0.1), False
    for i in range(cfg["layers"]):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", vec(h, 1.0, 0.1), False
        yield p + "attn_q.weight", mat(h, h), True
        yield p + "attn_q.bias", vec(h, 0.0, 0.1), False
        yield p + "attn_k.weight", mat(kv, h), True
        yield p + "attn_k.bias", vec(kv, 0.0, 0.1), False
        yield p + "attn_v.weight", mat(kv, h), True
        yield p + "attn_v.bias", vec(kv, 0.0, 0.1), False
        yield p + "attn_output.weight", mat(h, h), True
        yield p + "ffn_norm.weight", vec(h, 1.0, 0.1), False
        yield p + "ffn_gate.weight", mat(f, h), True
        yield p + "ffn_up.weight", mat(f, h), True
        yield p + "ffn_down.weight", mat(h, f), True


def write_gguf(path, cfg: dict, qtype: str, *, seed: int = 0) -> Path:
    """A Qwen2 GGUF of `cfg` with seeded random weights, matrices in `qtype` (q4_0 | q8_0).
    Cached: rewritten only when the file's sidecar stamp differs."""
    gguf = _gguf()
    path = Path(path)
    stamp = path.with_suffix(".stamp")
    key = {"cfg": cfg, "qtype": qtype, "seed": seed, "gguf": getattr(gguf, "__version__", "?"),
           "format": 1}
    if path.is_file() and B._stamp_ok(stamp, key):
        return path
    qt = {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q8_0": gguf.GGMLQuantizationType.Q8_0}[qtype]
    ft = {"q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[qtype]
    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), "qwen2")
    w.add_name(f"rvvkit-peer-qwen2-{cfg['hidden']}x{cfg['layers']}")
    w.add_context_length(4096)
    w.add_embedding_length(cfg["hidden"])
    w.add_block_count(cfg["layers"])
    w.add_feed_forward_length(cfg["intermediate"])
    w.add_head_count(cfg["heads"])
    w.add_head_count_kv(cfg["kv_heads"])
    w.add_rope_freq_base(float(cfg["rope_theta"]))
    w.add_layer_norm_rms_eps(float(cfg["eps"]))
    w.add_file_type(int(ft))
    # byte-level BPE vocabulary: the 256 byte characters, filler tokens, and <|endoftext|> last
    vocab = cfg["vocab"]
    tokens = (_byte_chars() + ["\u0120\u0120"])[: vocab - 1]
    tokens += [f"<tok{i}>" for i in range(len(tokens), vocab - 1)] + ["<|endoftext|>"]
    types = [int(gguf.TokenType.NORMAL)] * (vocab - 1) + [int(gguf.TokenType.CONTROL)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["\u0120 \u0120"])
    w.add_bos_token_id(vocab - 1)
    w.add_eos_token_id(vocab - 1)
    w.add_add_bos_token(False)
    for name, arr, quant in _weights(cfg, seed):
        if quant:
            w.add_tensor(name, gguf.quants.quantize(arr, qt), raw_dtype=qt)
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    stamp.write_text(json.dumps(key))
    return path


def reference_logits(cfg: dict, qtype: str, prompt: list, *, seed: int = 0) -> np.ndarray:
    """Logits after `prompt` from a float64 numpy Qwen2 forward over the dequantized weights."""
    gguf = _gguf()
    qt = {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q8_0": gguf.GGMLQuantizationType.Q8_0}[qtype]
    W = {n: (gguf.quants.dequantize(gguf.quants.quantize(a, qt), qt) if q else a).astype(
        np.float64) for n, a, q in _weights(cfg, seed)}
    h, nh, nkv = cfg["hidden"], cfg["heads"], cfg["kv_heads"]
    d, n = h // nh, len(prompt)

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + cfg["eps"]) * g

    def rope(x):  # [n, heads, d], NEOX style (halves), as llama.cpp does for Qwen2
        inv = cfg["rope_theta"] ** (-np.arange(0, d, 2) / d)
        ang = np.arange(n)[:, None] * inv[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., : d // 2], x[..., d // 2:]
        return np.concatenate([a * c - b * s, a * s + b * c], -1)

    x = W["token_embd.weight"][prompt]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(cfg["layers"]):
        p = f"blk.{i}."
        y = rms(x, W[p + "attn_norm.weight"])
        q = rope((y @ W[p + "attn_q.weight"].T + W[p + "attn_q.bias"]).reshape(n, nh, d))
        k = rope((y @ W[p + "attn_k.weight"].T + W[p + "attn_k.bias"]).reshape(n, nkv, d))
        v = (y @ W[p + "attn_v.weight"].T + W[p + "attn_v.bias"]).reshape(n, nkv, d)
        k, v = np.repeat(k, nh // nkv, 1), np.repeat(v, nh // nkv, 1)
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        o = np.einsum("hqk,khd->qhd", s / s.sum(-1, keepdims=True), v).reshape(n, h)
        x = x + o @ W[p + "attn_output.weight"].T
        y = rms(x, W[p + "ffn_norm.weight"])
        g = y @ W[p + "ffn_gate.weight"].T
        x = x + (g / (1 + np.exp(-g)) * (y @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
    return rms(x[-1], W["output_norm.weight"]) @ W["token_embd.weight"].T


def prompt_ids(n: int, vocab: int) -> list:
    return [(1 + 37 * i) % vocab for i in range(n)]  # the driver's prompt


def repack_info(log: str) -> dict:
    """What llama.cpp's verbose log says about its weight buffers: {"buffers": {name: MiB}}
    from llama-model.cpp's "load_tensors: <name> model buffer size = X MiB" lines, and
    {"repacked": {layout: tensors}} from repack.cpp's debug "repack tensor <t> with <layout>"
    lines (e.g. q4_0_16x1: Q4_0 weights laid out for the 16x1 RVV kernels)."""
    buffers, repacked = {}, {}
    for m in re.finditer(r"load_tensors:\s+(\S+) model buffer size =\s*([0-9.]+) MiB", log):
        buffers[m.group(1)] = float(m.group(2))
    for m in re.finditer(r"repack tensor \S+ with (\S+)", log):
        repacked[m.group(1)] = repacked.get(m.group(1), 0) + 1
    return {"buffers": buffers, "repacked": repacked,
            "used": "CPU_REPACK" in buffers and bool(repacked)}


def run_counted(driver, gguf_path, n_prompt: int, n_gen: int, n_ctx: int, vlen: int,
                timeout: float = 7200, isa: str = "k1", vl: bool = False) -> dict:
    """One driver run under qemu (ISA profile `isa`) with rvvkit's counting plugin: counts,
    output, wall time and what its verbose log says about repacked weights. With `vl`,
    under rvvkit's counting QEMU 10 and its VL-weighted plugin (the elements each vector
    instruction processes, beside the same LMUL-weighted counts)."""
    from rvvkit.runtime.counting import vcount
    plugin, read, keys, _ = vcount.counter(vl)
    with tempfile.TemporaryDirectory(prefix="peer-llama-") as tmp:
        out = Path(tmp) / "counts.json"
        # verbose (-v) in every run alike: the log lines are printed while loading, the same
        # in the three runs, so the per-token differences do not include them
        argv = [*B.qemu_prefix(vlen, isa, counting10=vl), *plugin(out), str(driver),
                str(gguf_path), str(n_prompt), str(n_gen), str(n_ctx), "-v"]
        t0 = time.time()
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
        wall = time.time() - t0
        err = proc.stderr.decode("utf-8", "replace")
        if proc.returncode != 0 or not out.exists():
            raise B.PeerError(f"llama.cpp driver failed at VLEN {vlen} (exit {proc.returncode}): "
                              f"{' '.join(argv)}\n{err[-3000:]}")
        counts = read(out)
    result = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    kept = {k: counts[k] for k in keys}
    if vl:   # by class x LMUL x SEW: what the K1 cost model reads
        kept["classes"] = counts["classes"]
    return {"counts": kept, "output": result,
            "wall_s": round(wall, 1), "repack": repack_info(err), "stderr": err.strip()[-2000:]}


def _weighted(c: dict) -> int:
    return c["insns"] - c["vector_insns"] + c["lmul_weighted_vector_ops"]


def count_llama(bin, gguf, prompt_tokens: int, gen_tokens: int, vlen: int, isa: str = "k1",
                variant: str = "fp32", vl: bool = False) -> dict:
    """Per-token instruction counts of llama.cpp at VLEN `vlen` from three counted runs.
    PeerError when the k1 variant at VLEN 256 did not use repacked weights."""
    p, g = prompt_tokens, gen_tokens
    n_ctx = 256 * -(-(2 * p + G0 + g + 1) // 256)
    runs = {}
    for key in [(p, G0), (p, G0 + g), (2 * p, G0)]:
        runs[key] = run_counted(bin, gguf, *key, n_ctx, vlen, isa=isa, vl=vl)
        check_repack(runs[key]["repack"], variant, vlen)
    base, gen, pro = (runs[k]["counts"] for k in [(p, G0), (p, G0 + g), (2 * p, G0)])

    def per(hi, lo, n):
        d = {k: (hi[k] - lo[k]) / n for k in hi if k != "classes"}
        d["weighted"] = (_weighted(hi) - _weighted(lo)) / n
        d["raw"] = d["insns"]
        if "classes" in hi:
            d["classes"] = per_token_classes(hi["classes"], lo["classes"], n)
        return d
    return {"vlen": vlen, "prompt_tokens": p, "gen_tokens": g, "n_ctx": n_ctx,
            "variant": variant, "isa": isa, "repack": runs[(p, G0)]["repack"],
            "counted_by": "qemu 10 (VL-weighted)" if vl else "qemu 7.2",
            "per_generated_token": per(gen, base, g), "per_prompt_token": per(pro, base, p),
            "runs": {f"p{k[0]}_g{k[1]}": v for k, v in runs.items()}}


def per_token_classes(hi: dict, lo: dict, n: int) -> dict:
    """(hi - lo) / n of two runs' {class: {"m1.e8": count}} tables."""
    from rvvkit.runtime.counting.iclass import table_difference
    return {c: {k: v / n for k, v in keys.items()}
            for c, keys in table_difference(hi, lo, "classes").items()}


def check_repack(info: dict, variant: str, vlen: int) -> None:
    """The k1 build at VLEN 256 must have repacked its weights (llama.cpp selects its 16x1
    RVV kernels only there, under __riscv_zvfh); the plain-RVV build never may."""
    if variant == "k1" and vlen == 256 and not info["used"]:
        raise B.PeerError(f"llama.cpp k1 at VLEN 256 did not repack its weights (buffers "
                          f"{info['buffers'] or 'none logged'}, repacked {info['repacked']}): "
                          "its fast path did not run; check the build's -march")
    if variant == "fp32" and info["used"]:
        raise B.PeerError(f"llama.cpp fp32 (plain RVV) repacked weights {info['repacked']}: "
                          "the build has Zvfh after all")


def check_output(res: dict, ref) -> dict:
    """Compare the driver's prompt logits with the numpy reference (None: no reference)."""
    out = res["runs"][f"p{res['prompt_tokens']}_g{G0}"]["output"]
    chk = {"prompt_argmax": out["prompt_argmax"], "tokens": out["tokens"]}
    if ref is not None:
        got = np.array(out["prompt_logits"])
        chk["ref_argmax"] = int(np.argmax(ref))
        # error of the first logits relative to the reference logits' spread; llama.cpp
        # quantizes activations to Q8_0 and keeps K/V in f16, so ~1e-2 is normal
        chk["max_err_over_std"] = float(np.abs(got - ref[: len(got)]).max() / np.std(ref))
        chk["ok"] = chk["ref_argmax"] == out["prompt_argmax"] and chk["max_err_over_std"] < 0.05
    return chk


def matrix_params(cfg: dict) -> int:
    """Weights in the 2-D matrices a token runs through (the token table once: it is also the
    tied LM head)."""
    h, d = cfg["hidden"], cfg["hidden"] // cfg["heads"]
    return cfg["vocab"] * h + cfg["layers"] * (
        2 * h * h + 2 * h * d * cfg["kv_heads"] + 3 * h * cfg["intermediate"])


def block_params(cfg: dict, kind: str) -> int:
    """The matrix weights one token of `kind` multiplies: a prompt token but the last skips
    the LM head (the driver asks for the last token's logits only), so its per-block figure
    leaves the head out; a generated token runs them all."""
    head = cfg["vocab"] * cfg["hidden"] if kind == "per_prompt_token" else 0
    return matrix_params(cfg) - head


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="small")
    ap.add_argument("--qtype", choices=QTYPES, default="q4_0")
    ap.add_argument("--vlen", type=int, nargs="+", default=[256])
    ap.add_argument("--prompt", type=int, default=8)
    ap.add_argument("--gen", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peer-variant", choices=("k1", "fp32", "both"), default="both",
                    help="llama.cpp at its K1 defaults (k1), plain RVV (fp32), or both")
    ap.add_argument("--isa", default="k1", help="ISA profile of the QEMU -cpu (toolchain/isa/)")
    ap.add_argument("--work-dir", type=Path, default=B.DEFAULT_WORK)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--ref-max-params", type=float, default=5e7)
    ap.add_argument("--vl", action="store_true",
                    help="count under rvvkit's counting QEMU 10 (scripts/qemu_plugins.sh): "
                         "the elements each vector instruction processes as well")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    try:
        return _main(a)
    except B.PeerError as exc:
        print(f"peer_llama: error: {exc}", file=sys.stderr)
        return 1


def _main(a) -> int:
    from peer_ncnn_build import variants
    cfg = CONFIGS[a.config]
    B.qemu_prefix(a.vlen[0], a.isa)            # a bad profile fails before any build
    builds = {}
    for variant in variants(a.peer_variant):
        builds[variant] = B.build_llama(a.work_dir, a.jobs, variant=variant)
    t0 = time.time()
    model = write_gguf(a.work_dir / "models" / f"qwen2-{a.config}-{a.qtype}-s{a.seed}.gguf",
                       cfg, a.qtype, seed=a.seed)
    t_gguf = time.time() - t0
    params = matrix_params(cfg)
    ref = (reference_logits(cfg, a.qtype, prompt_ids(a.prompt, cfg["vocab"]), seed=a.seed)
           if params <= a.ref_max_params else None)
    first = next(iter(builds.values()))
    report = {"llama_cpp_commit": first["commit"], "zig": first["zig"], "config": a.config,
              "cfg": cfg, "qtype": a.qtype, "params": params, "gguf": str(model), "isa": a.isa,
              "qemu_cpu": B.qemu_prefix(0, a.isa, a.vl)[-1].replace("vlen=0", "vlen=N"),
              "counted_by": "qemu 10 (VL-weighted)" if a.vl else "qemu 7.2",
              "builds": {v: {k: b[k] for k in ("mcpu", "march", "cmake_opts", "seconds")}
                         for v, b in builds.items()},
              "gguf_s": round(t_gguf, 1), "results": []}
    print(f"llama.cpp {first['commit'][:12]}  zig {first['zig']}  {a.config} {a.qtype} "
          f"({params / 1e6:.1f} M matrix params)  prompt {a.prompt}, gen {G0}->{G0 + a.gen}  "
          f"QEMU -cpu {report['qemu_cpu']}")
    for v, b in builds.items():
        print(f"  {v}: ggml-cpu -march={b['march']} (zig -mcpu={b['mcpu']} + its extensions)")
    print(f"{'variant':>7} {'VLEN':>5} {'kind':>10} {'weighted':>14} {'raw':>14} "
          f"{'vector':>13} {'vec-weighted':>13} {'/block':>7}  check")
    for variant, build in builds.items():
        for vlen in a.vlen:
            t0 = time.time()
            try:
                res = count_llama(build["driver"], model, a.prompt, a.gen, vlen, a.isa, variant,
                                  a.vl)
            except B.PeerError as exc:
                print(f"{variant:>7} {vlen:>5} FAILED: {str(exc).splitlines()[0]}")
                report["results"].append({"variant": variant, "vlen": vlen, "error": str(exc)})
                continue
            res["check"] = check_output(res, ref)
            res["wall_s"] = round(time.time() - t0, 1)
            report["results"].append(res)
            for kind in ("per_prompt_token", "per_generated_token"):
                d = res[kind]
                d["weighted_per_block"] = d["weighted"] / (block_params(cfg, kind) / 32)
                print(f"{variant:>7} {vlen:>5} {kind[4:]:>10} {d['weighted']:>14,.0f} "
                      f"{d['raw']:>14,.0f} {d['vector_insns']:>13,.0f} "
                      f"{d['lmul_weighted_vector_ops']:>13,.0f} {d['weighted_per_block']:>7.1f}  "
                      f"{'ok' if res['check'].get('ok') else res['check'].get('ok', 'n/a')}")
            rp = res["repack"]
            bufs = ", ".join(f"{k} {v:.1f} MiB" for k, v in rp["buffers"].items())
            print(f"        weights: {bufs}; repacked: {rp['repacked'] or 'none'}")
            print(f"        check {json.dumps(res['check'])}  ({res['wall_s']} s)")
    if a.json:
        a.json.write_text(json.dumps(report, indent=1, default=str))
    return 0 if all("error" not in r for r in report["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
