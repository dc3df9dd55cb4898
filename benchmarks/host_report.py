"""bench_host.py's reports: the results table (text and markdown), the per-model profile of
the slowest steps, the bar chart, and the ONNX shapes that say what a slow kernel computes."""
from __future__ import annotations

import math
import statistics
from typing import Dict, List

import numpy as np

from rvvkit.measure.report import table


def node_shapes(model) -> Dict[str, str]:
    """node name (as rvvkit names it) -> 'in -> out, W ..., attrs' from ONNX shape inference,
    run on a copy that carries big initializers as typed inputs (no weight data copied)."""
    import onnx
    from onnx import helper
    g = model.graph
    small = [i for i in g.initializer if int(np.prod(i.dims)) <= 4096]
    big = [helper.make_tensor_value_info(i.name, i.data_type, list(i.dims))
           for i in g.initializer if int(np.prod(i.dims)) > 4096]
    graph = helper.make_graph(list(g.node), g.name, list(g.input) + big, list(g.output), small)
    light = helper.make_model(graph, opset_imports=list(model.opset_import),
                              ir_version=model.ir_version)
    try:
        inferred = onnx.shape_inference.infer_shapes(light).graph
    except Exception:  # shapes are a nicety here
        return {}
    dims = {}
    for vi in list(inferred.value_info) + list(inferred.input) + list(inferred.output):
        d = vi.type.tensor_type.shape.dim
        dims[vi.name] = "x".join(str(x.dim_value) if x.dim_value else "?" for x in d)
    for i in g.initializer:
        dims[i.name] = "x".join(str(d) for d in i.dims)
    out = {}
    for k, n in enumerate(g.node):
        name = n.name or f"{n.op_type}_{k}"
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        text = f"{dims.get(n.input[0], '?') if n.input else ''} -> " \
               f"{dims.get(n.output[0], '?')}"
        if n.op_type == "Conv":
            pads = list(a.get("pads", [0, 0, 0, 0]))
            kernel = "x".join(map(str, a.get("kernel_shape", [])))
            text += (f", W {dims.get(n.input[1], '?')}, k{kernel}"
                     f" s{max(a.get('strides', [1]))} p{max(pads) if pads else 0}"
                     f" g{a.get('group', 1)}")
        elif n.op_type in ("Gemm", "MatMul"):
            text += f", B {dims.get(n.input[1], '?')}" + \
                (" (transB)" if a.get("transB", 0) else "")
        elif n.op_type in ("MaxPool", "AveragePool"):
            text += f", k{'x'.join(map(str, a.get('kernel_shape', [])))} " \
                    f"s{max(a.get('strides', [1]))}"
        out[name] = text
    return out



def profile_rows(sess, feeds, repeat: int, shapes: Dict[str, str], meta: Dict) -> List[Dict]:
    rows = sess.profile(feeds, repeat=repeat)
    total = sum(r["seconds"] for r in rows) or 1e-12
    ws = {k["name"]: k.get("workspace_floats", 0) for k in meta["kernels"]}
    for r in rows:
        r["share"] = r["seconds"] / total
        r["gflops"] = 2 * r["macs"] / r["seconds"] / 1e9 if r["macs"] and r["seconds"] else 0.0
        r["shape"] = shapes.get(r["node"], "")
        r["workspace_floats"] = ws.get(r["kernel"], 0)
    return rows


def print_profile(name: str, rows: List[Dict], top: int) -> None:
    total = sum(r["seconds"] for r in rows)
    by_op: Dict[str, float] = {}
    for r in rows:
        by_op[r["op"]] = by_op.get(r["op"], 0.0) + r["seconds"]
    ops = ", ".join(f"{op} {100 * s / total:.1f}%" for op, s in
                    sorted(by_op.items(), key=lambda kv: -kv[1])[:6])
    print(f"\n{name}: {len(rows)} steps, profiled total {1e3 * total:.2f} ms; by op: {ops}")
    body = []
    for r in sorted(rows, key=lambda r: -r["seconds"])[:top]:
        body.append([str(r["step"]), r["op"], r["node"][:28], r["kernel"][:26],
                     f"{1e3 * r['seconds']:.3f}", f"{100 * r['share']:.1f}%",
                     f"{r['gflops']:.1f}" if r["gflops"] else "-", r["shape"]])
    print(table(["step", "op", "node", "kernel", "ms", "share", "GFLOP/s", "shape"], body,
                 "rlllrrrl"))
    by_kernel: Dict[str, List[Dict]] = {}
    for r in rows:
        by_kernel.setdefault(r["kernel"], []).append(r)
    ranked = sorted(by_kernel.items(), key=lambda kv: -sum(r["seconds"] for r in kv[1]))[:top]
    print("by kernel (all calls): " + ", ".join(
        f"{k} x{len(rs)} {100 * sum(r['seconds'] for r in rs) / total:.1f}%"
        for k, rs in ranked))


HEADERS = ["model", "GMACs", "rvvkit ms", "ort ms", "rvvkit/ort", "rvvkit GFLOP/s",
           "build s", "JIT cold s", "warm load s", "n"]


def _row(r: Dict) -> List[str]:
    if "error" in r:
        return [r["model"], "-", "error", "-", "-", "-", "-", "-", "-", "-"]
    return [r["model"], f"{r['macs'] / 1e9:.2f}", f"{r['rvvkit']['median_ms']:.2f}",
            f"{r['ort']['median_ms']:.2f}", f"{r['ratio']:.2f}", f"{r['rvvkit_gflops']:.1f}",
            f"{r['build_s']:.2f}", f"{r['jit_cold_s']:.2f}", f"{r['warm_load_s']:.3f}",
            str(r["rvvkit"]["n"])]


def geomean(xs: List[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else float("nan")


def text_report(results: List[Dict], gm: float, env: Dict) -> str:
    body = [_row(r) for r in results]
    out = table(HEADERS, body, "lrrrrrrrrr")
    out += f"\n\ngeometric mean rvvkit/onnxruntime: {gm:.3f}"
    n = env.get("threads", 1)
    out += f"\n{env['cpu']}, {env['cpus']} CPUs; {env['compiler']}; onnxruntime " \
           f"{env['onnxruntime']}; {n} thread{'s' if n > 1 else ''} each; medians"
    loads = [r.get("other_load_before") for r in results if r.get("other_load_before") is not None]
    if loads and max(loads) > 0.15:
        out += f"\nnote: other processes kept up to {100 * max(loads):.0f}% of the CPUs busy " \
               f"before some measurements (see other_load_before in --json)"
    for r in results:
        if "error" in r:
            out += f"\n{r['model']}: {r['error']}"
    return out


def markdown_report(results: List[Dict], gm: float, env: Dict) -> str:
    lines = ["| " + " | ".join(HEADERS[:-1]) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(HEADERS) - 2)) + "|"]
    for r in results:
        lines.append("| " + " | ".join(_row(r)[:-1]) + " |")
    lines.append(f"| **geomean** | | | | **{gm:.2f}** | | | | |")
    lines.append("")
    n = env.get("threads", 1)
    lines.append(f"{n} thread{'s' * (n > 1)} each, median latency; {env['cpu']} "
                 f"({env['cpus']} CPUs), {env['compiler']}, onnxruntime {env['onnxruntime']} "
                 f"(`intra_op_num_threads={n}`, sequential, all graph optimisations), "
                 f"{env['time_utc']}. rvvkit/ort < 1 means rvvkit is faster. JIT cold: open "
                 f"the artifact with an empty compile cache; warm load: open it again in a new "
                 f"process with the cache warm.")
    return "\n".join(lines)


def plot(results: List[Dict], gm: float, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ok = [r for r in results if "error" not in r]
    names = [r["model"] for r in ok]
    x = np.arange(len(ok))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(6, 1.1 * len(ok) + 2), 7), sharex=True)
    ax1.bar(x - 0.2, [r["rvvkit"]["median_ms"] for r in ok], 0.4, label="rvvkit")
    ax1.bar(x + 0.2, [r["ort"]["median_ms"] for r in ok], 0.4, label="onnxruntime")
    ax1.set_yscale("log")
    ax1.set_ylabel("median latency (ms, log)")
    ax1.legend()
    ax1.set_title("single-thread host latency")
    ratios = [r["ratio"] for r in ok]
    bars = ax2.bar(x, ratios, 0.6, color=["tab:green" if v <= 1 else "tab:red" for v in ratios])
    for bar, v in zip(bars, ratios):
        ax2.text(bar.get_x() + bar.get_width() / 2, v, f"{v:.2f}", ha="center", va="bottom",
                 fontsize=8)
    ax2.axhline(1.0, color="k", lw=0.8)
    ax2.axhline(gm, color="tab:blue", ls="--", lw=0.8, label=f"geomean {gm:.2f}")
    ax2.set_ylabel("rvvkit / onnxruntime")
    ax2.legend()
    ax2.set_xticks(x)
    ax2.set_xticklabels(names, rotation=30, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


