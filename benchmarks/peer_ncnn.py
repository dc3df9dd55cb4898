"""Peer benchmark: ncnn against rvvkit under QEMU (RVV 1.0), by exact instruction counts.

    python3 benchmarks/peer_ncnn.py --markdown    # the issue's four models, VLEN 128 to 1024
    python3 benchmarks/peer_ncnn.py --models squeezenet --vlens 256
    python3 benchmarks/peer_ncnn.py --int8 --ncnn-tools ~/src/ncnn.git --vlens 256 --json peer.json
    python3 benchmarks/peer_ncnn.py --models mobilenet_v2 --vlens 128 256 512 1024
    python3 benchmarks/peer_ncnn.py --models squeezenet resnet50 mobilenet_v2_224 --vlens 256 \
        --peer-variant both --isa k1 --markdown

--peer-variant (default both): "k1" is ncnn as a K1 user builds and runs it -- NCNN_ZFH/ZVFH on
(zig -mcpu=baseline_rv64+v+zfh+zvfh) and ncnn's default options, so fp16 storage and arithmetic
(peer_ncnn_build.VARIANTS); "fp32" is the build with Zfh/Zvfh off and the fp16 options off.
Both are counted in one run beside one rvvkit build (--precision, passed to rvvkit's build
where it has the option; fp32 otherwise), all under the QEMU 7.2 -cpu of ISA profile --isa
(default k1: Zfh=true etc.; rvvkit compiled for that profile too). The k1 variant's output is
compared with onnxruntime's float32 (max abs error, max diff / range, top-1), with the looser
--fp16-tolerance. resnet50's seeded random weights overflow float16 (logits near +-2e5), so
where the k1 variant runs, every engine counts a copy with its BatchNorm scales x0.7 (logits
within +-50; instruction counts do not depend on the values).

For each model and VLEN (models: the onnx wheel's light architectures with seeded random
weights; "mobilenet_v2_224", benchmarks/mobilenet.py's MobileNetV2 at its published size
(300 M MACs); tests/models' float models such as mobilenet_v2 (its width-0.25 64x64 test model,
2.9 M MACs), via rvvkit.zoo.quant.float_model; "encoder", benchmarks/encoder.py's BERT-style
encoder, 2 layers x 512 wide x 128 tokens, its attention mask made a constant so both engines
take one input), one inference of ncnn and of rvvkit, each on one thread, is counted by
rvvkit's QEMU TCG plugin with the same qemu-riscv64, sysroot and -cpu string: a run doing one
inference after a warm-up minus a run doing only the warm-up (rvvkit:
QemuSession.instruction_counts, the same scheme).
Columns: "raw" = every dynamic instruction; "weighted" = insns - vector_insns +
lmul_weighted_vector_ops (each vector instruction counted as its LMUL register-group size,
other instructions as 1); the vector-only LMUL-weighted figures; MACs per raw instruction.

ncnn: the PyPI sdist (version pinned in peer_ncnn_build.py and printed), libncnn.a built for
riscv64 + RVV with zig's clang (PyPI ziglang), benchmarks/ncnn_runner.cpp linked against it,
one thread, default options (the fp32 variant with fp16/bf16 storage and arithmetic off; see
--peer-variant below). Models are converted
with pnnx (PyPI) and checked against onnxruntime on the same seeded input before anything is
counted (largest difference over the output's range <= --tolerance on the logits, same top-1,
at VLEN 128); a conversion that does not match is not reported. Each counted VLEN is checked
again: where pnnx's form is wrong there, the model with its Gemm layers as InnerProduct
(peer_ncnn_forms.py: ncnn's RISC-V Gemm has code for VLEN 128 and 256 only) is checked and, if
right, counted instead and marked; its count where both forms are right is printed beside
pnnx's, so the stand-in's cost can be judged. pnnx writes an opset-9 Softmax over
[1, C, 1, 1] with the wrong axis; the script sets the axis the ONNX model means and says so.

--int8: ncnn's int8 model from its own tools (ncnn2table with KL calibration on the same four
seeded inputs rvvkit's onnxruntime quantization uses, then ncnn2int8), built for the host from
the same ncnn source, against rvvkit's int8 QOperator model (rvvkit.zoo.quant, as in
bench_int8.py), both ending at the logits; each int8 output's agreement with onnxruntime's
fp32 model is reported. The PyPI sdist has no tools/ directory, so --int8 needs a Tencent/ncnn
git checkout (or bare git directory) with the matching tag (--ncnn-tools); the script checks
that tag's src/ against the sdist's. Build products live in --work-dir, never in the repo.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import peer_ncnn_build as B  # noqa: E402
import peer_ncnn_forms as F  # noqa: E402
import peer_ncnn_models as M  # noqa: E402
import peer_rvvkit as R  # noqa: E402
from peer_ncnn_build import PeerError, log  # noqa: E402

from rvvkit.measure.cycle_model import weighted_instructions  # noqa: E402

ENGINES = ("ncnn", "rvvkit")
# Where a conversion is checked: VLEN 128, which every ncnn RVV kernel has code for (its
# Gemm has none for 512 and up); each counted VLEN is checked again.
CHECK_VLEN = 128
# Models whose seeded random weights overflow float16, and the BatchNorm scale factor that
# keeps them in range (resnet50: logits near +-2e5 before, within +-50 after).
FP16_RESCALE = {"resnet50": 0.7}
ISA = "k1"   # set by main from --isa: the profile every QEMU run and rvvkit build uses


def qemu_prefix(vlen: int) -> list:
    from rvvkit.runtime.qemu import cpu_string, resolve_qemu, resolve_sysroot
    return [resolve_qemu(), "-L", resolve_sysroot(), "-cpu", cpu_string(vlen, isa=ISA)]


def rescaled_bn(model, factor: float):
    """A copy of `model` with every BatchNormalization scale multiplied by `factor`."""
    import copy
    from onnx import numpy_helper
    model = copy.deepcopy(model)
    inits = {i.name: i for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "BatchNormalization":
            init = inits[n.input[1]]
            arr = numpy_helper.to_array(init) * np.float32(factor)
            init.CopyFrom(numpy_helper.from_array(arr.astype(np.float32), init.name))
    return model


def fp32_model(name: str, rescale: bool) -> tuple:
    """M.fp32_model, or for a FP16_RESCALE model (rescale) its float16-safe copy with
    onnxruntime's outputs recomputed."""
    model, feeds, refs, top1 = M.fp32_model(name)
    if not (rescale and name in FP16_RESCALE):
        return model, feeds, refs, top1
    model = rescaled_bn(model, FP16_RESCALE[name])
    exposed = M.ort_outputs(M.with_logits(model), feeds)
    return model, feeds, [exposed[n] for n in (M.logits_name(model),
                                               model.graph.output[0].name)], top1


def _cached(path: Path, key: str, compute, recount: bool):
    if not recount:
        try:
            data = json.loads(path.read_text())
            if data.get("key") == key:
                return data["value"]
        except (OSError, ValueError):
            pass
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "value": value}))
    return value


def ncnn_argv(runner, model: dict, inp: Path, shape, repeat: int, outdir: Path, blobs) -> list:
    return [str(runner), model["param"], model["bin"], str(inp), "x".join(map(str, shape)),
            str(repeat),
            str(outdir), model["input"], *blobs]


def ncnn_outputs(runner, model: dict, inp: Path, shape, vlen: int, blobs) -> list:
    """Run the ncnn model once under QEMU (no counting) and read back `blobs`."""
    with tempfile.TemporaryDirectory(prefix="peer-ncnn-") as d:
        subprocess_run(qemu_prefix(vlen) + ncnn_argv(runner, model, inp, shape, 0, Path(d), blobs))
        return [np.fromfile(Path(d) / f"out{i}.raw", dtype=np.float32) for i in range(len(blobs))]


def subprocess_run(argv: list) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=7200)
    except subprocess.TimeoutExpired:
        raise PeerError(f"ncnn runner timed out after 7200 s: {' '.join(argv)}") from None
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip()[-2000:]
        raise PeerError(f"ncnn runner failed (exit {proc.returncode}): {' '.join(argv)}\n{tail}")


def ncnn_counts(runner, model: dict, inp: Path, shape, vlen: int, jobs: int) -> dict:
    """One inference: a run with REPEAT=1 minus one with REPEAT=0 (in parallel if jobs > 1)."""
    from concurrent.futures import ThreadPoolExecutor
    from rvvkit.runtime.counting.icount import COUNT_KEYS, count_instructions, per_run

    def count(repeat: int) -> dict:
        with tempfile.TemporaryDirectory(prefix="peer-ncnn-") as d:
            return count_instructions(qemu_prefix(vlen), ncnn_argv(
                runner, model, inp, shape, repeat, Path(d), [model["output"]]), timeout=7200)
    with ThreadPoolExecutor(max_workers=max(1, min(2, jobs))) as pool:
        hi, lo = pool.map(count, (1, 0))
    c = per_run(hi, lo, 1)
    return {k: int(c[k]) for k in COUNT_KEYS}


def rvvkit_counts(art, feeds: dict, vlen: int) -> dict:
    from rvvkit.runtime.counting.icount import COUNT_KEYS
    from rvvkit.runtime.qemu import QemuSession
    with QemuSession(art, vlen=vlen, isa=ISA) as sess:
        # One thread, as ncnn runs (ncnn_runner.cpp): the session's default is the machine's
        # online cores, whose split adds its repeated packing and hand-overs to the total.
        sess.set_threads(1)
        c = sess.instruction_counts(feeds)  # totals only here: per_thread is not compared
    return {k: int(c[k]) for k in COUNT_KEYS}



def prepare(name: str, prec: str, work: Path, tools, runner, vlen0: int, tol: float,
            args=None) -> dict:
    """The ncnn model, checked; rvvkit's artifact; the feeds and the check results."""
    import rvvkit
    from rvvkit import zoo
    from rvvkit.zoo import quant as zoo_quant
    label = f"{name} {prec}"
    top1 = True
    rescale = bool(args and "k1" in args.variants and name in FP16_RESCALE)
    if prec == "fp32":
        model, feeds, refs, top1 = fp32_model(name, rescale)
        if rescale:
            label += f" (BatchNorm scales x{FP16_RESCALE[name]})"
    else:
        model, feeds = zoo_quant.float_model(name)      # opset 13, ends at the logits
        refs = list(M.ort_outputs(model, feeds).values())
    base = work / "models" / (name + (f"-bn{FP16_RESCALE[name]}" if rescale else "")) / prec
    conv = M.pnnx_convert(model, feeds, base / "pnnx", label)
    inp = base / "input.raw"
    shape = M.write_input(feeds, inp)
    if len(refs) == 2 and conv["softmax_input"]:     # logits and the final output
        blobs = [conv["softmax_input"], conv["output"]]
    else:
        blobs, refs = [conv["output"]], refs[-1:]
    key = M.digest(conv["key"], Path(conv["param"]).read_bytes(), runner.read_bytes(), vlen0)
    got = _cached(base / "check_fp32.json", key, lambda: [
        a.tolist() for a in ncnn_outputs(runner, conv, inp, shape, vlen0, blobs)], False)
    res = {"fp32": M.check(label, [np.array(g) for g in got], refs, tol, True, top1)}
    if conv.get("note"):
        res["fix"] = conv["note"]
        log(f"{label}: {conv['note']}")
    out = {"ncnn": conv, "input": inp, "shape": shape, "feeds": feeds, "checks": res,
           "verify": (base, blobs, refs, top1, label)}
    if rescale:
        res["fix"] = (res.get("fix", "") + "; " if res.get("fix") else "") + \
            f"BatchNorm scales x{FP16_RESCALE[name]} (fp16 range)"
    if prec == "fp32":
        out["art"] = R.build(model, args.precision if args else "fp32")
        return out
    calib = zoo_quant._calibration(model, feeds)       # the inputs rvvkit's int8 model saw
    q = M.quantize_int8(tools, conv, calib, base / "int8", label)
    qkey = M.digest(q["key"], runner.read_bytes(), vlen0)
    (qgot,) = _cached(base / "check_int8.json", qkey, lambda: [
        a.tolist() for a in ncnn_outputs(runner, q, inp, shape, vlen0, [q["output"]])], False)
    res["ncnn_int8"] = M.agreement(np.array(qgot), refs[0])
    qpath = base / f"{name}_qop_int8.onnx"        # what zoo_quant.quantized writes
    qkey = M.digest(model.SerializeToString(), metadata.version("onnxruntime"))
    if not (qpath.is_file() and (base / "qop.key").is_file()
            and (base / "qop.key").read_text() == qkey):
        log(f"{label}: quantizing for rvvkit with onnxruntime (QOperator, int8)")
        qpath = Path(zoo_quant.quantized(name, "qop", str(base), "int8")[0])
        (base / "qop.key").write_text(qkey)
    out["art"] = rvvkit.build(str(qpath))
    res["rvvkit_int8"] = M.rvvkit_host_agreement(out["art"], feeds, refs[0])
    res["int8_layers"] = q["int8_layers"]
    log(f"{label}: top-1 vs onnxruntime fp32: ncnn int8 {res['ncnn_int8']['same_top1']}, "
        f"rvvkit int8 {res['rvvkit_int8']['same_top1']}")
    out["ncnn"] = q
    return out


def vlen_check(p: dict, conv: dict, tag: str, runner, vlen: int, tol: float,
               variant: str = "fp32") -> dict:
    """Whether the ncnn model `conv` (form `tag`) run by `variant`'s runner matches onnxruntime
    at this VLEN (prepare checked VLEN 128 in fp32 only; ncnn picks other RVV code paths as
    VLEN grows): M.check's result, plus the largest absolute logit error."""
    base, blobs, refs, top1, label = p["verify"]
    key = M.digest(conv["key"], Path(conv["param"]).read_bytes(), runner.read_bytes(), vlen,
                   *qemu_prefix(vlen))
    pre = "check_fp32_" if variant == "fp32" else f"check_{variant}_"
    got = _cached(base / f"{pre}{tag}{vlen}.json", key, lambda: [
        a.tolist() for a in ncnn_outputs(runner, conv, p["input"], p["shape"], vlen, blobs)],
        False)
    got = [np.array(g) for g in got]
    res = M.check(f"{label} ({tag or 'pnnx'} form, ncnn {variant}) VLEN {vlen}", got, refs, tol,
                  False, top1)
    res["max_abs_err"] = float(np.abs(got[0].ravel() - np.asarray(refs[0]).ravel()).max())
    return res


def innerproduct_form(p: dict) -> dict:
    """pnnx's model with its Gemm layers as InnerProduct (peer_ncnn_forms), or None when it
    has no Gemm layer to rewrite."""
    conv = p["ncnn"]
    base = p["verify"][0]
    form = F.gemm_as_innerproduct(Path(conv["param"]), Path(conv["bin"]), base / "innerproduct")
    if not form["rewritten"]:
        return None
    return dict(conv, key=form["key"], param=form["param"], bin=form["bin"])


def ncnn_form_counts(p, conv, tag, name, prec, vlen, work, runner, args, variant="fp32") -> dict:
    cpu = qemu_prefix(vlen)
    nkey = M.digest(Path(conv["param"]).read_bytes(), Path(conv["bin"]).read_bytes(),
                    runner.read_bytes(), p["input"].read_bytes(), *cpu)
    vt = "" if variant == "fp32" else f"{variant}-"
    nc = _cached(work / "counts" / f"ncnn-{name}-{prec}-{vt}{tag}{vlen}.json", nkey,
                 lambda: ncnn_counts(runner, conv, p["input"], p["shape"], vlen, args.jobs),
                 args.recount)
    return dict(nc, weighted=weighted_instructions(nc))


def peer_row(p, name, prec, vlen, work, runner, args, variant: str) -> dict:
    """ncnn `variant`'s counts at this VLEN, in pnnx's form or, where that is wrong here, the
    InnerProduct form; with its output check."""
    tol = args.tolerance if variant == "fp32" else args.fp16_tolerance
    out = {"form": "pnnx"}
    out["counts"] = ncnn_form_counts(p, p["ncnn"], "", name, prec, vlen, work, runner, args,
                                     variant)
    chk = vlen_check(p, p["ncnn"], "", runner, vlen, tol, variant) if prec == "fp32" else None
    if chk is not None and not chk["agrees"]:
        # pnnx's form is wrong here (ncnn's Gemm kernel has no code for this VLEN): count
        # the equivalent InnerProduct form instead, if the model has one and it is right
        if "alt" not in p:     # rewritten once per model, then reused by every VLEN
            p["alt"] = innerproduct_form(p)
        alt = p["alt"]
        achk = alt and vlen_check(p, alt, "ip", runner, vlen, tol, variant)
        if achk and achk["agrees"]:
            log(f"{name} VLEN {vlen} ncnn {variant}: pnnx's form is wrong, counting the "
                "InnerProduct form")
            out["pnnx_wrong"] = out["counts"]
            out["counts"] = ncnn_form_counts(p, alt, "ip", name, prec, vlen, work, runner,
                                             args, variant)
            out["form"], chk = "InnerProduct", achk
    if chk is not None and not chk["agrees"]:
        log(f"{name} {prec}: ncnn {variant}'s output at VLEN {vlen} does not match onnxruntime: "
            "its count there is not comparable")
    out["counts"]["weighted"] = weighted_instructions(out["counts"])
    out["ok"] = None if chk is None else chk["agrees"]
    out["check"] = chk
    return out


def measure(name, prec, vlens, work, tools, runners, args) -> tuple:
    check_runner = runners["fp32"]
    p = prepare(name, prec, work, tools, check_runner, CHECK_VLEN, args.tolerance, args)
    macs = int(p["art"].meta["macs"])
    art_key = M.digest(p["art"].to_bytes())
    # int8 is ncnn's own int8 path: run by the fp32 variant only (fp16 options off)
    variants = args.variants if prec == "fp32" else ("fp32",)
    rows = []
    for vlen in vlens:
        cpu = qemu_prefix(vlen)
        t0 = time.perf_counter()
        row = {"model": name, "precision": prec, "vlen": vlen, "macs": macs, "isa": ISA,
               "rvvkit_precision": args.precision, "peers": {}}
        for v in variants:
            row["peers"][v] = peer_row(p, name, prec, vlen, work, runners[v], args, v)
        rkey = M.digest(art_key, *cpu, os.environ.get("RVVKIT_COMPILER", ""), "threads=1", ISA)
        rc = _cached(work / "counts" / f"rvvkit-{name}-{prec}-{ISA}-{vlen}.json", rkey,
                     lambda: rvvkit_counts(p["art"], p["feeds"], vlen), args.recount)
        row["rvvkit"] = dict(rc, weighted=weighted_instructions(rc))
        for v, peer in row["peers"].items():
            peer["rvvkit_over_ncnn"] = row["rvvkit"]["weighted"] / peer["counts"]["weighted"]
        rows.append(row)
        log(f"{name} {prec} VLEN {vlen}: weighted " + ", ".join(
            f"ncnn {v} {pr['counts']['weighted'] / 1e6:.1f} M ({pr['form']} form)"
            for v, pr in row["peers"].items())
            + f", rvvkit {row['rvvkit']['weighted'] / 1e6:.1f} M "
            f"({time.perf_counter() - t0:.0f}s)")
    alt = p.get("alt")
    if alt:     # what the substitute costs where both forms are right: is it a fair stand-in?
        for row in rows:
            for v, peer in row["peers"].items():
                if peer["form"] == "pnnx" and peer["ok"]:
                    peer["innerproduct"] = ncnn_form_counts(p, alt, "ip", name, prec,
                                                            row["vlen"], work, runners[v],
                                                            args, v)
    return rows, {"model": name, "precision": prec, **p["checks"]}


def _m(x) -> str:
    return f"{x / 1e6:,.1f} M"


VARIANT_NAMES = {"k1": "ncnn fp16 (K1 default)", "fp32": "ncnn fp32"}


def side_by_side(rows) -> tuple:
    """The headline table: each ncnn variant and rvvkit in one row per model and VLEN."""
    fp = [r for r in rows if r["precision"] == "fp32"]
    vs = [v for v in B.PEER_VARIANTS if any(v in r["peers"] for r in fp)]
    prec = fp[0]["rvvkit_precision"] if fp else "fp32"
    heads = ["model", "VLEN", *[VARIANT_NAMES[v] for v in vs], f"rvvkit {prec}",
             *[f"rvvkit / {VARIANT_NAMES[v]}" for v in vs]]
    if "k1" in vs:
        heads += ["ncnn fp16 logits: max abs err / range vs ORT fp32", "same top-1"]
    body = []
    for r in fp:
        peers = [r["peers"].get(v) for v in vs]
        line = [r["model"], r["vlen"],
                *[_m(pr["counts"]["weighted"]) + ("" if pr["ok"] is not False else " (wrong)")
                  if pr else "-" for pr in peers],
                _m(r["rvvkit"]["weighted"]),
                *[f"{pr['rvvkit_over_ncnn']:.2f}" if pr else "-" for pr in peers]]
        k1 = r["peers"].get("k1")
        if "k1" in vs:
            c = (k1 or {}).get("check") or {}
            line += [f"{c['max_abs_err']:.2e} / {c['max_diff_of_range']:.1e}" if c else "-",
                     {True: "yes", False: "NO"}.get(c.get("same_top1"), "-")]
        body.append(line)
    return heads, body


def print_tables(rows, checks, markdown: bool) -> None:
    from rvvkit.measure.report import table
    heads, body = side_by_side(rows)
    if body:
        print(f"\nside by side: LMUL-weighted instructions of one inference, one thread, same "
              f"plugin, same -cpu (ISA profile {ISA})\n")
        _emit(heads, body, markdown, table)
    heads = ["model", "VLEN", "ncnn raw", "rvvkit raw", "ncnn weighted", "rvvkit weighted",
             "weighted ncnn / rvvkit", "ncnn vec LMUL-weighted", "rvvkit vec LMUL-weighted",
             "ncnn MACs/insn", "rvvkit MACs/insn", "ncnn output ok"]
    for prec in ("fp32", "int8"):
        for v in B.PEER_VARIANTS:
            sel = [(r, r["peers"][v]) for r in rows if r["precision"] == prec and v in r["peers"]]
            body = [[r["model"], r["vlen"], _m(n["counts"]["insns"]), _m(r["rvvkit"]["insns"]),
                     _m(n["counts"]["weighted"]), _m(r["rvvkit"]["weighted"]),
                     f"{1 / n['rvvkit_over_ncnn']:.3f}",
                     _m(n["counts"]["lmul_weighted_vector_ops"]),
                     _m(r["rvvkit"]["lmul_weighted_vector_ops"]),
                     f"{r['macs'] / n['counts']['insns']:.2f}",
                     f"{r['macs'] / r['rvvkit']['insns']:.2f}",
                     {True: "yes", False: "NO: not comparable", None: "-"}[n["ok"]]
                     + ("" if n["form"] == "pnnx" else f" ({n['form']} form; pnnx's wrong)")]
                    for r, n in sel]
            if body:
                what = VARIANT_NAMES[v] if prec == "fp32" else "ncnn int8"
                print(f"\n{prec} model: {what} vs rvvkit (one inference, dynamic instructions "
                      "under QEMU)\n")
                _emit(heads, body, markdown, table)
    both = [(r, v, n) for r in rows for v, n in r["peers"].items() if "innerproduct" in n]
    if both:
        print("\nncnn's two forms where both are right (Gemm layers as pnnx writes them, and as "
              "InnerProduct, counted where pnnx's form is wrong): weighted instructions\n")
        _emit(["model", "ncnn", "VLEN", "pnnx form (Gemm)", "InnerProduct form",
               "InnerProduct / Gemm"],
              [[r["model"], v, r["vlen"], _m(n["counts"]["weighted"]),
                _m(n["innerproduct"]["weighted"]),
                f"{n['innerproduct']['weighted'] / n['counts']['weighted']:.3f}"]
               for r, v, n in both], markdown, table)
    body = []
    for c in checks:
        q = c.get("ncnn_int8")
        i8 = [f"{q['max_diff_of_range']:.3f} / {q['same_top1']}",
              f"{c['rvvkit_int8']['max_diff_of_range']:.3f} / {c['rvvkit_int8']['same_top1']}"
              ] if q else ["-", "-"]
        body.append([c["model"], c["precision"], f"{c['fp32']['max_diff_of_range']:.1e}",
                     c["fp32"].get("same_top1", "n/a (encoder)"), *i8, c.get("fix", "") or "-"])
    print("\nchecks against onnxruntime fp32 on the logits, or the output where a model has no "
          "softmax (max diff / range, same top-1)\n")
    _emit(["model", "source model", "ncnn fp32 max diff / range", "ncnn fp32 top-1",
           "ncnn int8", "rvvkit int8 (host)", "param fix"], body, markdown, table, "l" * 7)


def _emit(heads, body, markdown, table, align=None) -> None:
    if markdown:
        print("| " + " | ".join(heads) + " |\n|" + "---|" * len(heads))
        for b in body:
            print("| " + " | ".join(str(x) for x in b) + " |")
    else:
        print(table(heads, body, align=align or "lr" + "r" * (len(heads) - 2)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+",
                   default=["squeezenet", "resnet50", "mobilenet_v2_224", "encoder"])
    p.add_argument("--vlens", nargs="+", type=int, default=[128, 256, 512, 1024])
    p.add_argument("--int8", action="store_true", help="also count ncnn int8 vs rvvkit int8")
    p.add_argument("--ncnn-tools", default=os.environ.get("RVVKIT_NCNN_TOOLS", ""),
                   help=f"Tencent/ncnn checkout or git dir with tag {B.NCNN_TAG} (for --int8)")
    p.add_argument("--work-dir", default=os.environ.get(
        "RVVKIT_PEER_DIR", str(Path.home() / ".cache" / "rvvkit-peer")))
    p.add_argument("--jobs", type=int, default=2,
                   help="parallel build jobs and ncnn QEMU runs (default 2)")
    p.add_argument("--tolerance", type=float, default=1e-3,
                   help="largest fp32 difference over the output's range accepted (1e-3)")
    p.add_argument("--recount", action="store_true", help="ignore cached counts")
    p.add_argument("--peer-variant", choices=("k1", "fp32", "both"), default="both",
                   help="ncnn at its K1 defaults (fp16), fp32, or both (default)")
    p.add_argument("--precision", choices=R.PRECISIONS, default="fp32",
                   help="rvvkit's build precision, where its builder has the option (fp32)")
    p.add_argument("--isa", default="k1",
                   help="ISA profile (toolchain/isa/) of every QEMU run and rvvkit build (k1)")
    p.add_argument("--fp16-tolerance", type=float, default=5e-2,
                   help="largest fp16 difference over the logits' range accepted (5e-2)")
    p.add_argument("--json", help="write versions, checks and rows to this file")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)
    try:
        return _main(args)
    except (PeerError, R.PrecisionUnsupported) as exc:
        print(f"peer_ncnn: error: {exc}", file=sys.stderr)
    except Exception as exc:   # noqa: BLE001 - rvvkit/QEMU failures: one message, no traceback
        name = type(exc).__name__
        if not name.endswith(("Error", "Unavailable", "NotFound")):
            raise
        print(f"peer_ncnn: error: {name}: {exc}", file=sys.stderr)
    return 1


def _main(args) -> int:
    global ISA
    from rvvkit.jit import isa as isa_profiles
    ISA = isa_profiles.profile(args.isa).name       # a bad name fails here, in one line
    args.variants = B.variants(args.peer_variant)
    R.build_kwargs(args.precision)                  # an unsupported precision fails early
    work = Path(args.work_dir).expanduser().resolve()
    if HERE.parent in work.parents or work == HERE.parent:
        raise PeerError(f"--work-dir {work} is inside the repository; use a cache directory")
    B.need_pnnx()
    qemu_prefix(args.vlens[0])                 # fails early without QEMU or the sysroot
    src = B.fetch_source(work)
    tools = B.build_host_tools(work, src, args.ncnn_tools, args.jobs) if args.int8 else None
    # the fp32 build always: conversions are checked against onnxruntime in fp32
    builds = {v: B.build_riscv(work, src, args.jobs, v)
              for v in dict.fromkeys(("fp32", *args.variants))}
    runners = {v: b["runner"] for v, b in builds.items()}
    versions = {"ncnn": B.NCNN_VERSION, "zig": builds["fp32"]["zig"],
                "pnnx": metadata.version("pnnx"),
                "qemu_cpu": qemu_prefix(0)[-1].replace("vlen=0", "vlen=N"), "isa": ISA,
                "onnxruntime": metadata.version("onnxruntime"),
                "rvvkit_precision": args.precision,
                "ncnn_builds": {v: {"mcpu": b["mcpu"], "cmake": b["cmake"],
                                    "build_s": b["seconds"]} for v, b in builds.items()}}
    if tools:
        versions["ncnn_tools"] = tools["note"]
    log("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items() if k != "ncnn_builds"))
    rows, checks = [], []
    for prec in ("fp32", "int8") if args.int8 else ("fp32",):
        for name in args.models:
            r, c = measure(name, prec, args.vlens, work, tools, runners, args)
            rows += r
            checks.append(c)
    print(f"ncnn {B.NCNN_VERSION} (zig {versions['zig']}, pnnx {versions['pnnx']}) vs rvvkit "
          f"{args.precision}; QEMU -cpu {versions['qemu_cpu']} (ISA profile {ISA})")
    for v in args.variants:
        print(f"  {VARIANT_NAMES[v]}: -mcpu={builds[v]['mcpu']}, "
              f"{' '.join(o for o in builds[v]['cmake'] if 'ZFH' in o or 'ZVFH' in o)}")
    if tools:
        print(f"ncnn int8 tools: {tools['note']}")
        if B.riscv_int8_note(src):
            print(f"note: {B.riscv_int8_note(src)}")
    print_tables(rows, checks, args.markdown)
    unknown = [(r["model"], r["vlen"], e) for r in rows
               for e, c in [("rvvkit", r["rvvkit"]), *[(f"ncnn {v}", n["counts"])
                                                      for v, n in r["peers"].items()]]
               if c["vector_insns_unknown_lmul"]]
    for m, v, e in unknown:
        print(f"note: {e} {m} VLEN {v} ran vector instructions under a vtype the plugin could "
              "not read (vsetvl); its weighted count is a lower bound")
    if args.json:
        Path(args.json).write_text(json.dumps({"versions": versions, "checks": checks,
                                               "rows": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
