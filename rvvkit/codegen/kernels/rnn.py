"""RNN, GRU and LSTM kernels: per direction and batch row, the time steps in order (reverse
direction: backwards from the row's sequence length); each step is a GEMV of the input and of
the previous hidden state against the ONNX weight rows (W, R read in place: row-major rows are
the dot products' contiguous operands), then the gate arithmetic. Workspace: the gates of one
step, the hidden and cell states and a scratch row."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from ..cfmt import flt, indent
from ..kernel import Kernel, Lowered, Param, declare_spec, make_spec

declare_spec("rnn", ("cell", "seq", "batch", "input", "hidden", "ndirs", "reverse", "layout",
                     "acts", "clip", "lbr", "inputs", "outputs"))

# ONNX gate order in W/R/B rows: LSTM i, o, f, c; GRU z, r, h; RNN i
INPUTS = ("x", "w", "r", "b", "sl", "h0", "c0", "p")


def act_c(act: Tuple[str, float, float], v: str) -> str:
    """C expression of a recurrent activation (name, alpha, beta) of expression `v`."""
    name, al, be = act
    a, b = flt(al), flt(be)
    return {
        "Sigmoid": f"1.0f / (1.0f + expf(-({v})))",
        "Tanh": f"tanhf({v})",
        "Relu": f"fmaxf({v}, 0.0f)",
        "HardSigmoid": f"fminf(fmaxf({a} * ({v}) + {b}, 0.0f), 1.0f)",
        "LeakyRelu": f"(({v}) >= 0.0f ? ({v}) : {a} * ({v}))",
        "Affine": f"({a} * ({v}) + {b})",
        "ScaledTanh": f"({a} * tanhf({b} * ({v})))",
        "Elu": f"(({v}) >= 0.0f ? ({v}) : {a} * (expf({v}) - 1.0f))",
        "Softsign": f"(({v}) / (1.0f + fabsf({v})))",
        "Softplus": f"log1pf(expf({v}))",
        "ThresholdedRelu": f"(({v}) > {a} ? ({v}) : 0.0f)",
    }[name]


# A dot product in 8 interleaved partial sums: compilers vectorise it without -ffast-math
# (a single running sum is a serial chain they must keep in order). Shared with attention.py.
DOT = {"hd_rvk_dot": """static RVK_HD inline float rvk_dot(const float *__restrict a,
                                     const float *__restrict b, long n) {
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const long n8 = n - n % 8;
    for (long i = 0; i < n8; i += 8) {
        for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
    }
    float s = 0.0f;
    for (long i = n8; i < n; ++i) s += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + s;
}"""}


def _dot(dst: str, wrow: str, vec: str, n: int) -> str:
    return f"{dst} += rvk_dot({wrow}, {vec}, {n});"


def _gates_pre(ng: int, hid: int, inp: int, has_b: bool, clip: Optional[float],
               skip_rows: int = 0) -> str:
    """gates[j] = x_t . W[j] + h . R[j] + Wb[j] + Rb[j] for rows j < ng*hid (GRU with
    linear_before_reset=0: the h-gate rows get only the x part here, see _gru)."""
    bias = f"bd[j] + bd[{ng * hid} + j]" if has_b else "0.0f"
    rec = _dot("g", "rd + j * %d" % hid, "h", hid)
    if skip_rows:
        rec = f"if (j < {ng * hid - skip_rows}) {rec}"
    clipc = ""
    if clip is not None:
        c = flt(clip)
        clipc = f"\n        g = fminf(fmaxf(g, -{c}), {c});"
    return f"""for (long j = 0; j < {ng * hid}; ++j) {{
    float g = {bias};
{indent(_dot("g", "wd + j * %d" % inp, "xt", inp))}
{indent(rec)}{clipc if not skip_rows else ""}
    gates[j] = g;
}}"""


def _clip(clip: Optional[float], v: str) -> str:
    if clip is None:
        return v
    return f"fminf(fmaxf({v}, -{flt(clip)}), {flt(clip)})"


def _step(op: str, hid: int, inp: int, acts, has_b: bool, has_p: bool, clip, lbr: int) -> str:
    """One time step for one direction/batch row: reads xt, updates h (and c)."""
    if op == "RNN":
        f, = acts
        return _gates_pre(1, hid, inp, has_b, clip) + f"""
for (long j = 0; j < {hid}; ++j) h[j] = {act_c(f, "gates[j]")};"""
    if op == "LSTM":
        f, gg, hh = acts
        pi = "pd[j] * c[j] + " if has_p else ""
        po = f"pd[{hid} + j] * c[j] + " if has_p else ""
        pf = f"pd[{2 * hid} + j] * c[j] + " if has_p else ""
        # with peepholes the clip applies to the sums including them (below)
        return _gates_pre(4, hid, inp, has_b, None if has_p else clip) + f"""
for (long j = 0; j < {hid}; ++j) {{
    const float ig = {act_c(f, _clip(clip, pi + "gates[j]") if has_p else "gates[j]")};
    const float fg = {act_c(f, _clip(clip, pf + f"gates[{2 * hid} + j]") if has_p
                            else f"gates[{2 * hid} + j]")};
    const float cg = {act_c(gg, _clip(clip if has_p else None, f"gates[{3 * hid} + j]"))};
    c[j] = fg * c[j] + ig * cg;
    const float og = {act_c(f, _clip(clip, po + f"gates[{hid} + j]") if has_p
                            else f"gates[{hid} + j]")};
    h[j] = og * {act_c(hh, "c[j]")};
}}"""
    f, gg = acts
    # GRU: z, r rows complete; h rows: x part + Wb (+ Rb), recurrent part added below
    rb = f"bd[{5 * hid} + j]" if has_b else "0.0f"
    if lbr:
        rec = f"""float rh = {rb};
{_dot("rh", f"rd + ({2 * hid} + j) * {hid}", "h", hid)}
const float pre = gates[{2 * hid} + j] + rt * rh;"""
    else:
        rec = f"""float rh = {rb};
{_dot("rh", f"rd + ({2 * hid} + j) * {hid}", "tmp", hid)}
const float pre = gates[{2 * hid} + j] + rh;"""
    reset = "" if lbr else f"\nfor (long j = 0; j < {hid}; ++j) tmp[j] = gates[{hid} + j] * h[j];"
    return _gru_pre(hid, inp, has_b, clip) + reset + f"""
for (long j = 0; j < {hid}; ++j) {{
    const float rt = gates[{hid} + j];
    (void)rt;
{indent(rec)}
    gates[{2 * hid} + j] = {act_c(gg, _clip(clip, "pre"))};
}}
for (long j = 0; j < {hid}; ++j) {{
    const float zt = gates[j];
    h[j] = (1.0f - zt) * gates[{2 * hid} + j] + zt * h[j];
}}"""


def step(op: str, hid: int, inp: int, acts, has_b: bool, has_p: bool, clip, lbr: int) -> str:
    """One time step (one direction's activations), as top-level loops over j only: each loop
    is a phase the CUDA form runs across threads with a barrier before it."""
    body = _step(op, hid, inp, acts, has_b, has_p, clip, lbr)
    return body.replace("ACT_F(gates[j])", act_c(acts[0], "gates[j]")) if op == "GRU" else body


def state_index(layout: int, batch: int, ndirs: int, hid: int) -> str:
    """C expression: offset of (direction d, batch row bb) in the initial/final states."""
    return f"(d * {batch} + bb) * {hid}" if layout == 0 else f"(bb * {ndirs} + d) * {hid}"


def _gru_pre(hid: int, inp: int, has_b: bool, clip) -> str:
    """GRU: z and r activated in `gates`; the h rows hold x . Wh + Wbh only."""
    zr = _gates_pre(2, hid, inp, has_b, clip).replace(f"bd[{2 * hid} + j]",
                                                      f"bd[{3 * hid} + j]")
    xb = "bd[j]" if has_b else "0.0f"   # j runs over the h rows here
    return f"""{zr}
for (long j = 0; j < {2 * hid}; ++j) gates[j] = ACT_F(gates[j]);
for (long j = {2 * hid}; j < {3 * hid}; ++j) {{
    float g = {xb};
{indent(_dot("g", f"wd + j * {inp}", "xt", inp))}
    gates[j] = g;
}}"""


def rnn(op: str, seq: int, batch: int, inp: int, hid: int, ndirs: int, reverse: bool,
        layout: int, acts, clip: Optional[float], lbr: int, inputs: Sequence[bool],
        outputs: Sequence[bool]) -> Lowered:
    """inputs/outputs: presence flags of (X, W, R, B, sequence_lens, initial_h, initial_c, P)
    and (Y, Y_h, Y_c); params bind to the present ones in that order."""
    ng = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    has = dict(zip(INPUTS, inputs))
    has_y, has_yh, has_yc = (list(outputs) + [False] * 3)[:3]
    lstm = op == "LSTM"
    params = [Param(nm, dtype="int32" if nm == "sl" else "float32")
              for nm, on in zip(INPUTS, inputs) if on]
    params += [Param(nm, False) for nm, on in zip(("y", "yh", "yc"), (has_y, has_yh, has_yc))
               if on]
    # state index of (direction d, batch row bb) in initial/final states, per layout
    st = state_index(layout, batch, ndirs, hid)
    xt = f"x + (t * {batch} + bb) * {inp}" if layout == 0 else f"x + (bb * {seq} + t) * {inp}"
    yt = (f"y + ((t * {ndirs} + d) * {batch} + bb) * {hid}" if layout == 0
          else f"y + ((bb * {seq} + t) * {ndirs} + d) * {hid}")
    length = f"sl[bb] < 0 ? 0 : (sl[bb] > {seq} ? {seq} : sl[bb])" if has["sl"] else str(seq)

    def fill(dst: str, src: str) -> str:
        return f"for (long j = 0; j < {hid}; ++j) {dst}[j] = {src};"
    steps = []
    for d in range(ndirs):
        body = step(op, hid, inp, acts[d], has["b"], has["p"], clip, lbr)
        per_row = [f"const long len = {length};",
                   fill("h", f"h0[{st} + j]" if has["h0"] else "0.0f")]
        if lstm:
            per_row.append(fill("c", f"c0[{st} + j]" if has["c0"] else "0.0f"))
        per_step = [f"const long t = {'len - 1 - s' if reverse or d == 1 else 's'};",
                f"const float *__restrict xt = {xt};", body]
        if has_y:
            per_step += [f"float *__restrict yt = {yt};", fill("yt", "h[j]")]
        per_row.append(f"for (long s = 0; s < len; ++s) {{\n{indent(chr(10).join(per_step))}\n}}")
        per_row += [fill("(yh + " + st + ")", "h[j]")] if has_yh else []
        per_row += [fill("(yc + " + st + ")", "c[j]")] if has_yc else []
        ptrs = [f"const long d = {d};",
                f"const float *__restrict wd = w + d * {ng * hid * inp};",
                f"const float *__restrict rd = r + d * {ng * hid * hid};"]
        ptrs += [f"const float *__restrict bd = b + d * {2 * ng * hid};"] if has["b"] else []
        ptrs += [f"const float *__restrict pd = p + d * {3 * hid};"] if has["p"] else []
        rows = f"for (long bb = 0; bb < {batch}; ++bb) {{\n{indent(chr(10).join(per_row))}\n}}"
        steps.append("{\n" + indent("\n".join(ptrs + [rows])) + "\n}")
    zero = f"for (long i = 0; i < {seq * ndirs * batch * hid}; ++i) y[i] = 0.0f;\n" \
        if has_y else ""
    ws = ng * hid + 3 * hid
    # (nvcc warns of a pointer set and never used, even through a void cast)
    head = f"float *__restrict gates = ws;\nfloat *__restrict h = ws + {ng * hid};\n"
    head += f"float *__restrict c = ws + {ng * hid + hid};\n" if lstm else ""
    head += f"float *__restrict tmp = ws + {ng * hid + 2 * hid};\n" if op == "GRU" and not lbr \
        else ""
    body = head + zero + "\n".join(steps)
    spec = make_spec("rnn", cell=op, seq=seq, batch=batch, input=inp, hidden=hid, ndirs=ndirs,
                     reverse=reverse, layout=layout, acts=acts, clip=clip, lbr=lbr,
                     inputs=tuple(inputs), outputs=tuple(outputs))
    macs = seq * batch * ndirs * ng * hid * (inp + hid)
    return Lowered(Kernel(op.lower(), tuple(params), indent(body) + "\n", ws, dict(DOT),
                          macs=macs, spec=spec))
