"""The recurrent step as one dot product per gate row (used by the CUDA form, whose threads
each take rows j of a step; the C form is layers.py's). Each top-level loop over j is a phase the
CUDA form runs across threads with a barrier before it. `packed`: W and R are stored
input-major ([dir][k][row], layers.py's build-time transform), so row j's weights are strided;
otherwise ONNX's row-major [dir][row][k]."""
from __future__ import annotations

from typing import Optional

from ...cfmt import indent
from .gates import GATES, act_c, clip_c, lstm_update

# A dot product in 8 interleaved partial sums: compilers vectorise it without -ffast-math
# (a single running sum is a serial chain they must keep in order). Shared with llm/attention.py.
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


class _Rows:
    def __init__(self, packed: bool, rows: int):
        self.packed, self.rows = packed, rows

    def dot(self, dst: str, mat: str, row: str, vec: str, n: int) -> str:
        """dst += (row `row` of mat) . vec[0:n]"""
        if not self.packed:
            return f"{dst} += rvk_dot({mat} + ({row}) * {n}, {vec}, {n});"
        return (f"for (long k = 0; k < {n}; ++k) "
                f"{dst} += {mat}[k * {self.rows} + ({row})] * {vec}[k];")


def _gates_pre(rw: _Rows, ng: int, hid: int, inp: int, has_b: bool,
               clip: Optional[float]) -> str:
    """gates[j] = x_t . W[j] + h . R[j] + Wb[j] + Rb[j] for rows j < ng*hid."""
    bias = f"bd[j] + bd[{rw.rows} + j]" if has_b else "0.0f"
    clipc = f"\n    g = {clip_c(clip, 'g')};" if clip is not None else ""
    return f"""for (long j = 0; j < {ng * hid}; ++j) {{
    float g = {bias};
{indent(rw.dot("g", "wd", "j", "xt", inp))}
{indent(rw.dot("g", "rd", "j", "h", hid))}{clipc}
    gates[j] = g;
}}"""


def _gru(rw: _Rows, hid: int, inp: int, acts, has_b: bool, clip, lbr: int) -> str:
    f, gg = acts
    g3 = 3 * hid
    zr = _gates_pre(rw, 2, hid, inp, has_b, clip)
    xb = "bd[j]" if has_b else "0.0f"   # j runs over the h rows here
    rb = f"bd[{g3} + j]" if has_b else "0.0f"   # Rb of h row j
    src, pre = ("h", "gates[j] + rt * rh") if lbr else ("tmp", "gates[j] + rh")
    reset = "" if lbr else \
        f"\nfor (long j = 0; j < {hid}; ++j) tmp[j] = gates[{hid} + j] * h[j];"
    return f"""{zr}
for (long j = 0; j < {2 * hid}; ++j) gates[j] = {act_c(f, "gates[j]")};
for (long j = {2 * hid}; j < {g3}; ++j) {{
    float g = {xb};
{indent(rw.dot("g", "wd", "j", "xt", inp))}
    gates[j] = g;
}}{reset}
for (long j = {2 * hid}; j < {g3}; ++j) {{
    const float rt = gates[j - {hid}];
    (void)rt;
    float rh = {rb};
{indent(rw.dot("rh", "rd", "j", src, hid))}
    gates[j] = {act_c(gg, clip_c(clip, pre))};
}}
for (long j = 0; j < {hid}; ++j) {{
    const float zt = gates[j];
    h[j] = (1.0f - zt) * gates[{2 * hid} + j] + zt * h[j];
}}"""


def step(op: str, hid: int, inp: int, acts, has_b: bool, has_p: bool, clip, lbr: int,
         packed: bool) -> str:
    """One time step for one direction/batch row: reads xt, updates h (and c)."""
    rw = _Rows(packed, GATES[op] * hid)
    if op == "RNN":
        return _gates_pre(rw, 1, hid, inp, has_b, clip) + f"""
for (long j = 0; j < {hid}; ++j) h[j] = {act_c(acts[0], "gates[j]")};"""
    if op == "LSTM":
        return _gates_pre(rw, 4, hid, inp, has_b, None if has_p else clip) + "\n" + \
            lstm_update(hid, acts, has_p, clip)
    return _gru(rw, hid, inp, acts, has_b, clip, lbr)


