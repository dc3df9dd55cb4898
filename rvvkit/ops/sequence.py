"""Recurrent layers (RNN, GRU, LSTM), Einsum and Attention (ai.onnx opsets 23-25, with KV
cache, qk_matmul_output, nonpad_kv_seqlen and sliding window): shape rules with canonical
attributes (direction count, hidden size, activations with their parameters, einsum terms,
attention heads, scale, past length, window) so lowerings never re-derive them."""
from __future__ import annotations

import math

import numpy as np

from .registry import F32, bad, broadcast_shapes, in_shape, opt_input, register

# gate count and default activations (f, g, h) of each recurrent op
RNN_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
RNN_DEFAULT_ACTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"),
                    "LSTM": ("Sigmoid", "Tanh", "Tanh")}
# activations the recurrent kernels take, with their default (alpha, beta)
RNN_ACTS = {"Sigmoid": (0.0, 0.0), "Tanh": (0.0, 0.0), "Relu": (0.0, 0.0),
            "HardSigmoid": (0.2, 0.5), "LeakyRelu": (0.01, 0.0), "Affine": (1.0, 0.0),
            "ScaledTanh": (1.0, 1.0), "Elu": (1.0, 0.0), "Softsign": (0.0, 0.0),
            "Softplus": (0.0, 0.0), "ThresholdedRelu": (1.0, 0.0)}


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _rnn_acts(node, ndirs: int):
    """((name, alpha, beta), ...) per direction and activation slot."""
    a = node.attrs
    names = [_text(s) for s in a.get("activations", ())]
    per_dir = len(RNN_DEFAULT_ACTS[node.op])
    if not names:
        names = list(RNN_DEFAULT_ACTS[node.op]) * ndirs
    if len(names) != per_dir * ndirs:
        raise bad(node, f"{len(names)} activations given, {per_dir * ndirs} expected")
    alphas, betas = list(a.get("activation_alpha", ())), list(a.get("activation_beta", ()))
    out = []
    for name in names:
        canon = {k.lower(): k for k in RNN_ACTS}.get(name.lower())
        if canon is None:
            raise bad(node, f"activation {name!r} is not supported")
        da, db = RNN_ACTS[canon]
        # alpha/beta lists hold values only for the activations that take them, in order
        takes = canon in ("HardSigmoid", "LeakyRelu", "Affine", "ScaledTanh", "Elu",
                          "ThresholdedRelu")
        al = float(alphas.pop(0)) if takes and alphas else da
        be = float(betas.pop(0)) if canon in ("HardSigmoid", "Affine", "ScaledTanh") \
            and betas else db
        out.append((canon, al, be))
    return tuple(tuple(out[d * per_dir:(d + 1) * per_dir]) for d in range(ndirs))


def _rnn(node, g):
    a = node.attrs
    x, w, r = in_shape(node, g, 0), in_shape(node, g, 1), in_shape(node, g, 2)
    direction = _text(a.get("direction", "forward"))
    if direction not in ("forward", "reverse", "bidirectional"):
        raise bad(node, f"direction {direction!r} unknown")
    ndirs = 2 if direction == "bidirectional" else 1
    layout = int(a.get("layout", 0))
    if len(x) != 3 or layout not in (0, 1):
        raise bad(node, f"input shape {list(x)} / layout {layout} unsupported")
    seq, batch = (x[0], x[1]) if layout == 0 else (x[1], x[0])
    gates = RNN_GATES[node.op]
    hidden = int(a.get("hidden_size", r[-1]))
    if w != (ndirs, gates * hidden, x[2]) or r != (ndirs, gates * hidden, hidden):
        raise bad(node, f"W {list(w)} / R {list(r)} do not match {ndirs} direction(s), hidden "
                        f"size {hidden}, input size {x[2]}")
    if int(a.get("input_forget", 0)):
        raise bad(node, "input_forget=1 is not supported")
    for i, n in ((3, 2 * gates * hidden), (7, 3 * hidden)):
        name = opt_input(node, i)
        if name and g.t(name).size != ndirs * n:
            raise bad(node, f"input {i} has {g.t(name).size} elements, expected {ndirs * n}")
    state = (ndirs, batch, hidden) if layout == 0 else (batch, ndirs, hidden)
    for i in (5, 6):
        name = opt_input(node, i)
        if name and in_shape(node, g, i) != state:
            raise bad(node, f"initial state {list(in_shape(node, g, i))} != {list(state)}")
    name = opt_input(node, 4)
    if name and in_shape(node, g, 4) != (batch,):
        raise bad(node, f"sequence_lens shape {list(in_shape(node, g, 4))} != [{batch}]")
    a["acts"] = _rnn_acts(node, ndirs)
    a["ndirs"], a["hidden"], a["layout"], a["direction"] = ndirs, hidden, layout, direction
    a["clip"] = float(a["clip"]) if "clip" in a else None
    a["lbr"] = int(a.get("linear_before_reset", 0))
    y = (seq, ndirs, batch, hidden) if layout == 0 else (batch, seq, ndirs, hidden)
    outs = [(y, F32), (state, F32)]
    return outs + [(state, F32)] if node.op == "LSTM" else outs


for _op in RNN_GATES:
    register(_op, dtypes=("float32", "int32"))(_rnn)


# ---------------------------------------------------------------------------------------------
# Einsum

def _einsum_terms(node, shapes):
    """(input terms, output term) with "..." expanded to digits (never letters of an ONNX
    equation, so they cannot clash), right-aligned as broadcasting aligns the axes."""
    eq = _text(node.attrs["equation"]).replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise bad(node, f"equation {eq!r} names {len(terms)} inputs, {len(shapes)} given")
    nell = 0
    out = []
    for t, s in zip(terms, shapes):
        if "..." in t:
            k = len(s) - (len(t) - 3)
            nell = max(nell, k)
            t = t.replace("...", DIGITS[10 - k:] if k > 0 else "")
        if len(t) != len(s) or not all(c.isalpha() or c.isdigit() for c in t):
            raise bad(node, f"term {t!r} does not fit input shape {list(s)}")
        out.append(t)
    ell = DIGITS[10 - nell:] if nell else ""
    if arrow:
        rhs = rhs.replace("...", ell)
    else:   # implicit output: the ellipsis, then letters used once, alphabetically
        letters = "".join(out)
        rhs = ell + "".join(sorted(c for c in set(letters) if c.isalpha()
                                   and letters.count(c) == 1))
    return out, rhs


DIGITS = "0123456789"


@register("Einsum", lambda node, xs: [np.einsum(_text(node.attrs["equation"]), *xs)
                                      .astype(xs[0].dtype)])
def _einsum(node, g):
    shapes = [in_shape(node, g, i) for i in range(len(node.inputs))]
    terms, rhs = _einsum_terms(node, shapes)
    dims = {}
    for t, s in zip(terms, shapes):
        for c, d in zip(t, s):
            if dims.get(c, d) != d and 1 not in (d, dims[c]):
                raise bad(node, f"index {c!r} has sizes {dims[c]} and {d}")
            dims[c] = max(d, dims.get(c, d))
    if any(c not in dims for c in rhs) or len(set(rhs)) != len(rhs):
        raise bad(node, f"output term {rhs!r} is invalid")
    node.attrs["terms"], node.attrs["out_term"], node.attrs["dims"] = tuple(terms), rhs, dims
    return [(tuple(dims[c] for c in rhs), F32)]


# ---------------------------------------------------------------------------------------------
# Attention (opsets 23-25)

def _attention_heads(node, g, q, k, v):
    """(B, Hq, Hkv, Sq, Skv, D, Dv) of Q, K, V, whichever layout (4-D, or 3-D with heads
    packed in the last axis)."""
    a = node.attrs
    if not len(q) == len(k) == len(v) or len(q) not in (3, 4):
        raise bad(node, f"Q {list(q)}, K {list(k)}, V {list(v)}: all 3-D or all 4-D expected")
    if len(q) == 4:
        b, hq, sq, d = q
        _, hk, skv, dk = k
        dv = v[3]
        if v[:3] != (b, hk, skv):
            raise bad(node, f"V {list(v)} does not match K {list(k)}")
    else:
        if "q_num_heads" not in a or "kv_num_heads" not in a:
            raise bad(node, "3-D inputs need q_num_heads and kv_num_heads")
        hq, hk = int(a["q_num_heads"]), int(a["kv_num_heads"])
        b, sq = q[:2]
        skv = k[1]
        if q[2] % hq or k[2] % hk or v[2] % hk or v[:2] != k[:2]:
            raise bad(node, f"Q {list(q)}, K {list(k)}, V {list(v)} do not split into heads")
        d, dk, dv = q[2] // hq, k[2] // hk, v[2] // hk
    if dk != d or k[0] != b or hq % hk:
        raise bad(node, f"Q {list(q)} and K {list(k)}: head sizes / heads incompatible")
    return b, hq, hk, sq, skv, d, dv


def _attention_cache(node, g, b, hk, d, dv):
    """Length of the past key/value cache (0: none); present_key/present_value (KV cache
    update inside the op) are written whenever named, past or not."""
    pk, pv = opt_input(node, 4), opt_input(node, 5)
    outs = list(node.outputs) + [""] * 4
    if bool(pk) != bool(pv) or bool(outs[1]) != bool(outs[2]):
        raise bad(node, "past_key/past_value, and present_key/present_value, come in pairs")
    if pk and not outs[1]:
        raise bad(node, "past_key/past_value without present_key/present_value outputs")
    if not pk:
        return 0
    if opt_input(node, 6):
        raise bad(node, "nonpad_kv_seqlen cannot be combined with past_key/past_value")
    ks, vs = in_shape(node, g, 4), in_shape(node, g, 5)
    if len(ks) != 4 or ks[:2] != (b, hk) or ks[3] != d or vs != (b, hk, ks[2], dv):
        raise bad(node, f"past_key {list(ks)} / past_value {list(vs)} do not match "
                        f"[{b}, {hk}, past, {d} / {dv}]")
    return ks[2]


@register("Attention", dtypes=("float32", "bool", "int64"))
def _attention(node, g):
    a = node.attrs
    q, k, v = (in_shape(node, g, i) for i in range(3))
    b, hq, hk, sq, skv, d, dv = _attention_heads(node, g, q, k, v)
    past = _attention_cache(node, g, b, hk, d, dv)
    total = past + skv
    mask = opt_input(node, 3)
    if mask:   # the key axis may be shorter than the keys: the rest is masked
        ms = in_shape(node, g, 3)
        if not 1 <= len(ms) <= 4 or ms[-1] > total or broadcast_shapes(
                node, [ms, (b, hq, sq, ms[-1])]) != (b, hq, sq, ms[-1]):
            raise bad(node, f"attn_mask {list(ms)} does not broadcast to {[b, hq, sq, total]}")
    nonpad = opt_input(node, 6)
    if nonpad and (in_shape(node, g, 6) != (b,) or g.t(nonpad).dtype != np.int64):
        raise bad(node, f"nonpad_kv_seqlen must be int64 of shape [{b}]")
    mode = int(a.get("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        raise bad(node, f"qk_matmul_output_mode {mode} unknown")
    if int(a.get("softmax_precision", 1)) not in (1, 11):   # float32 (double: as float32)
        raise bad(node, "softmax_precision other than float/double is not supported")
    window = (int(a.get("left_window_size", -1)), int(a.get("right_window_size", -1)))
    if min(window) < -1:
        raise bad(node, f"window sizes {list(window)}: -1 or more expected")
    scale = a.get("scale")
    a["scale_val"] = float(scale) if scale is not None else 1.0 / math.sqrt(d)
    a["softcap"] = float(a.get("softcap", 0.0))
    a["is_causal"] = int(a.get("is_causal", 0))
    a["dims"] = (b, hq, hk, sq, total, d, dv)
    a["past"], a["window"], a["qk_mode"] = past, window, mode
    y = (b, hq, sq, dv) if len(q) == 4 else (b, sq, hq * dv)
    return [(y, F32), ((b, hk, total, d), F32), ((b, hk, total, dv), F32),
            ((b, hq, sq, total), F32)]
