"""RNN, GRU and LSTM kernels (C form; the CUDA form is rows.py's row-per-thread step).

Per direction and batch row the time steps run in order (reverse direction: backwards from the
row's sequence length). A step adds x_t.W and h.R into the gate rows as sweeps over
input-major weights ([dir][k][gate row], transposed at build time when W and R are constants,
else into the workspace when the kernel starts): the inner loop then runs over contiguous gate
rows, which compilers vectorise with no horizontal sums, where ONNX's row-major layout would
need one short dot product per gate row. Then the gate arithmetic, call-free so it vectorises
too. Workspace: one step's gates, the hidden and cell states, two scratch rows (GRU) and, for
run-time weights, the transposed W and R of one direction."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ...cfmt import indent
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import loop
from .gates import GATES, INPUTS, act_c, clip_c, lstm_update, state_index

declare_spec("rnn", ("cell", "seq", "batch", "input", "hidden", "ndirs", "reverse", "layout",
                     "acts", "clip", "lbr", "inputs", "outputs", "packed"))


def packed_weights(w: np.ndarray) -> np.ndarray:
    """ONNX W [dir][row][k] (or R) as the kernel's input-major [dir][k][row]."""
    return np.ascontiguousarray(np.transpose(w, (0, 2, 1)))


def _proj(dst: str, mat: str, width: int, vec: str, n: int, stride: int) -> str:
    """dst[j] += sum_k vec[k] * mat[k * stride + j] for j < width. Four k per sweep over dst:
    a quarter of the loads and stores of dst that one k per sweep would take."""
    out = []
    n4 = n - n % 4
    if n4:
        out.append(f"""for (long k = 0; k < {n4}; k += 4) {{
    const float v0 = {vec}[k], v1 = {vec}[k + 1], v2 = {vec}[k + 2], v3 = {vec}[k + 3];
    const float *__restrict m0 = {mat} + k * {stride};
    const float *__restrict m1 = m0 + {stride};
    const float *__restrict m2 = m1 + {stride};
    const float *__restrict m3 = m2 + {stride};
    for (long j = 0; j < {width}; ++j) {{
        {dst}[j] += (v0 * m0[j] + v1 * m1[j]) + (v2 * m2[j] + v3 * m3[j]);
    }}
}}""")
    if n % 4:
        out.append(f"""for (long k = {n4}; k < {n}; ++k) {{
    const float v0 = {vec}[k];
    const float *__restrict m0 = {mat} + k * {stride};
    for (long j = 0; j < {width}; ++j) {dst}[j] += v0 * m0[j];
}}""")
    return "\n".join(out)


def _bias_init(op: str, hid: int, has_b: bool) -> str:
    """gates = Wb + Rb (GRU's h rows: Wb only; their Rb joins the recurrent part)."""
    g = GATES[op] * hid
    if not has_b:
        return f"for (long j = 0; j < {g}; ++j) gates[j] = 0.0f;"
    both = 2 * hid if op == "GRU" else g
    text = f"for (long j = 0; j < {both}; ++j) gates[j] = bd[j] + bd[{g} + j];"
    if op == "GRU":
        text += f"\nfor (long j = {both}; j < {g}; ++j) gates[j] = bd[j];"
    return text


def _gru_tail(hid: int, acts, has_b: bool, clip: Optional[float], lbr: int) -> str:
    """GRU after the x part: z and r, then the h rows' recurrent part (of h, or of r*h when
    linear_before_reset=0) and the state update."""
    f, gg = acts
    g, h2 = 3 * hid, 2 * hid
    zr_pre = clip_c(clip, "gates[j]")
    rb = f"bd[{g + h2} + j]" if has_b else "0.0f"
    src, pre = ("h", f"gates[{h2} + j] + gates[{hid} + j] * rec[j]") if lbr else \
        ("tmp", f"gates[{h2} + j] + rec[j]")
    reset = "" if lbr else f"for (long j = 0; j < {hid}; ++j) tmp[j] = gates[{hid} + j] * h[j];\n"
    return f"""{_proj("gates", "rt", h2, "h", hid, g)}
for (long j = 0; j < {h2}; ++j) gates[j] = {act_c(f, zr_pre)};
for (long j = 0; j < {hid}; ++j) rec[j] = {rb};
{reset}{_proj("rec", f"rt + {h2}", hid, src, hid, g)}
for (long j = 0; j < {hid}; ++j) {{
    const float zt = gates[j];
    const float ht = {act_c(gg, clip_c(clip, pre))};
    h[j] = (1.0f - zt) * ht + zt * h[j];
}}"""


def c_step(op: str, hid: int, inp: int, acts, has_b: bool, has_p: bool,
           clip: Optional[float], lbr: int) -> str:
    """One time step for one direction/batch row: reads xt, updates h (and c)."""
    g = GATES[op] * hid
    parts = [_bias_init(op, hid, has_b), _proj("gates", "wt", g, "xt", inp, g)]
    if op == "GRU":
        return "\n".join(parts + [_gru_tail(hid, acts, has_b, clip, lbr)])
    parts.append(_proj("gates", "rt", g, "h", hid, g))
    if clip is not None and not has_p:   # with peepholes the clip includes them (lstm_update)
        parts.append(f"for (long j = 0; j < {g}; ++j) gates[j] = {clip_c(clip, 'gates[j]')};")
    if op == "RNN":
        parts.append(f"for (long j = 0; j < {hid}; ++j) h[j] = {act_c(acts[0], 'gates[j]')};")
    else:
        parts.append(lstm_update(hid, acts, has_p, clip))
    return "\n".join(parts)


def _direction(d: int, op: str, dims, has, packed: bool, rows: str) -> str:
    seq, batch, inp, hid, ndirs = dims
    g = GATES[op] * hid
    if packed:
        ptrs = [f"const float *__restrict wt = w + {d * g * inp};",
                f"const float *__restrict rt = r + {d * g * hid};"]
    else:   # run-time weights: this direction's W and R transposed into the workspace
        ptrs = ["const float *__restrict wt = wpack;", "const float *__restrict rt = rpack;",
                f"""for (long row = 0; row < {g}; ++row) {{
    for (long k = 0; k < {inp}; ++k) wpack[k * {g} + row] = w[{d * g * inp} + row * {inp} + k];
    for (long k = 0; k < {hid}; ++k) rpack[k * {g} + row] = r[{d * g * hid} + row * {hid} + k];
}}"""]
    ptrs.insert(0, f"const long d = {d};")
    ptrs += [f"const float *__restrict bd = b + {d * 2 * g};"] if has["b"] else []
    ptrs += [f"const float *__restrict pd = p + {d * 3 * hid};"] if has["p"] else []
    return "{\n" + indent("\n".join(ptrs + [rows])) + "\n}"


def rnn(op: str, seq: int, batch: int, inp: int, hid: int, ndirs: int, reverse: bool,
        layout: int, acts, clip: Optional[float], lbr: int, inputs: Sequence[bool],
        outputs: Sequence[bool], packed: bool) -> Lowered:
    """inputs/outputs: presence flags of (X, W, R, B, sequence_lens, initial_h, initial_c, P)
    and (Y, Y_h, Y_c); params bind to the present ones in that order. packed: W and R are
    constants, stored input-major by the returned transforms."""
    g = GATES[op] * hid
    has = dict(zip(INPUTS, inputs))
    has_y, has_yh, has_yc = (list(outputs) + [False] * 3)[:3]
    lstm = op == "LSTM"
    params = [Param(nm, dtype="int32" if nm == "sl" else "float32")
              for nm, on in zip(INPUTS, inputs) if on]
    params += [Param(nm, False) for nm, on in zip(("y", "yh", "yc"), (has_y, has_yh, has_yc))
               if on]
    st = state_index(layout, batch, ndirs, hid)
    xt = f"x + (t * {batch} + bb) * {inp}" if layout == 0 else f"x + (bb * {seq} + t) * {inp}"
    yt = (f"y + ((t * {ndirs} + d) * {batch} + bb) * {hid}" if layout == 0
          else f"y + ((bb * {seq} + t) * {ndirs} + d) * {hid}")
    length = f"sl[bb] < 0 ? 0 : (sl[bb] > {seq} ? {seq} : sl[bb])" if has["sl"] else str(seq)

    def fill(dst: str, src: str) -> str:
        return f"for (long j = 0; j < {hid}; ++j) {dst}[j] = {src};"
    dirs = []
    for d in range(ndirs):
        per_row = [f"const long len = {length};",
                   fill("h", f"h0[{st} + j]" if has["h0"] else "0.0f")]
        if lstm:
            per_row.append(fill("c", f"c0[{st} + j]" if has["c0"] else "0.0f"))
        per_step = [f"const long t = {'len - 1 - s' if reverse or d == 1 else 's'};",
                    f"const float *__restrict xt = {xt};",
                    c_step(op, hid, inp, acts[d], has["b"], has["p"], clip, lbr)]
        if has_y:
            per_step += [f"float *__restrict yt = {yt};", fill("yt", "h[j]")]
        per_row.append(f"for (long s = 0; s < len; ++s) {{\n{indent(chr(10).join(per_step))}\n}}")
        per_row += [fill("(yh + " + st + ")", "h[j]")] if has_yh else []
        per_row += [fill("(yc + " + st + ")", "c[j]")] if has_yc else []
        rows = loop("bb", 0, batch, "\n".join(per_row), "long")
        dirs.append(_direction(d, op, (seq, batch, inp, hid, ndirs), has, packed, rows))
    zero = f"for (long i = 0; i < {seq * ndirs * batch * hid}; ++i) y[i] = 0.0f;\n" \
        if has_y else ""
    # (nvcc warns of a pointer set and never used, even through a void cast: declare only
    # what the body reads)
    names = ["gates", "h"] + (["c"] if lstm else []) + (["rec"] if op == "GRU" else []) + \
        (["tmp"] if op == "GRU" and not lbr else [])
    sizes = [g] + [hid] * (len(names) - 1)
    if not packed:
        names, sizes = names + ["wpack", "rpack"], sizes + [g * inp, g * hid]
    head, off = "", 0
    for nm, size in zip(names, sizes):
        head += f"float *__restrict {nm} = ws + {off};\n"
        off += size
    spec = make_spec("rnn", cell=op, seq=seq, batch=batch, input=inp, hidden=hid, ndirs=ndirs,
                     reverse=reverse, layout=layout, acts=acts, clip=clip, lbr=lbr,
                     inputs=tuple(inputs), outputs=tuple(outputs), packed=packed)
    macs = seq * batch * ndirs * g * (inp + hid)
    kernel = Kernel(op.lower(), tuple(params), indent(head + zero + "\n".join(dirs)) + "\n",
                    off, {}, macs=macs, spec=spec)
    return Lowered(kernel, {1: packed_weights, 2: packed_weights} if packed else None)



