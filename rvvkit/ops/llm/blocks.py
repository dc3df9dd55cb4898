"""The decoder blocks of onnxruntime-genai's models: SimplifiedLayerNormalization (RMSNorm;
onnxruntime registers it in the ONNX domain), com.microsoft SkipSimplifiedLayerNormalization
(RMSNorm of input + skip [+ bias], also returning that sum), MatMulNBits (a float matrix
times a block-quantized 4- or 8-bit weight, rvvkit/ops/llm/nbits.py has the format) and
GroupQueryAttention (causal attention of S new tokens against a key/value cache of
`max_seq` positions shared between past and present: the new keys and values are written at
positions past .. past + S - 1, where past = seqlens_k + 1 - S, and only the live prefix is
read). Attributes are canonicalised into node.attrs here; the kernels read only those."""
from __future__ import annotations

import numpy as np

from . import nbits
from ..registry import F32, bad, in_shape, opt_input, register

MS = "com.microsoft."
I32 = np.dtype(np.int32)


def _rms(x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    x = np.asarray(x, np.float64)
    inv = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return (x * inv * gamma).astype(np.float32)


def _check_norm(node, g, x, gamma_at: int) -> None:
    gamma = in_shape(node, g, gamma_at)
    if tuple(gamma) != (x[-1],):
        raise bad(node, f"scale {list(gamma)} must be [{x[-1]}] (the last axis of {list(x)})")
    node.attrs["epsilon"] = float(node.attrs.get("epsilon", 1e-5))
    node.attrs["cols"] = int(x[-1])


def _sln_eval(node, xs):
    return [_rms(xs[0], xs[1], node.attrs["epsilon"])]


@register("SimplifiedLayerNormalization", _sln_eval)
def _sln(node, g):
    x = in_shape(node, g, 0)
    axis = int(node.attrs.get("axis", -1))
    if axis not in (-1, len(x) - 1):
        raise bad(node, f"axis {axis}: only the last axis is supported")
    if len([o for o in node.outputs if o]) > 1:
        raise bad(node, "its inv_std_var output is not supported")
    _check_norm(node, g, x, 1)
    return [(tuple(x), F32)]


def _skip_eval(node, xs):
    s = np.asarray(xs[0], np.float32) + xs[1]
    if len(xs) > 3 and xs[3] is not None:
        s = s + xs[3]
    return [_rms(s, xs[2], node.attrs["epsilon"]), None, None, s.astype(np.float32)]


@register(MS + "SkipSimplifiedLayerNormalization", _skip_eval)
def _skip(node, g):
    x = in_shape(node, g, 0)
    if tuple(in_shape(node, g, 1)) != tuple(x):
        raise bad(node, f"skip {list(in_shape(node, g, 1))} must have the input's shape {list(x)}")
    if opt_input(node, 3) and tuple(in_shape(node, g, 3)) != (x[-1],):
        raise bad(node, f"bias {list(in_shape(node, g, 3))} must be [{x[-1]}]")
    if any(o for o in node.outputs[1:3]):
        raise bad(node, "its mean and inv_std_var outputs are not supported")
    _check_norm(node, g, x, 2)
    return [(tuple(x), F32), ((), F32), ((), F32), (tuple(x), F32)][:len(node.outputs)]


def _nbits_eval(node, xs):
    a = node.attrs
    zp = xs[3] if len(xs) > 3 else None
    if a["int8_act"]:
        y = nbits.matmul_int8_act(xs[0], xs[1], xs[2], zp, a["K"], a["N"], a["bits"],
                                  a["block_size"])
    else:
        w = nbits.dequantize(xs[1], xs[2], zp, a["K"], a["N"], a["bits"], a["block_size"])
        y = np.asarray(xs[0], np.float32) @ w
    if len(xs) > 5 and xs[5] is not None:
        y = y + xs[5]
    return [y.astype(np.float32)]


INT8_ACTIVATIONS = "rvvkit_int8_activations"   # an rvvkit attribute: see _matmul_nbits


@register(MS + "MatMulNBits", _nbits_eval, dtypes=("float32", "uint8"))
def _matmul_nbits(node, g):
    a = node.attrs
    k, n, bits, block = (int(a.get(key, 0)) for key in ("K", "N", "bits", "block_size"))
    x = in_shape(node, g, 0)
    if bits not in (4, 8):
        raise bad(node, f"bits {bits}: 4 and 8 are supported")
    if block < 16 or block & (block - 1):
        raise bad(node, f"block_size {block}: a power of two >= 16 expected")
    if not x or x[-1] != k:
        raise bad(node, f"input {list(x)} must end in K = {k}")
    nb = nbits.blocks_of(k, block)
    for i, what in ((1, "B"), (2, "scales")):
        if not g.is_const(node.inputs[i]):
            raise bad(node, f"{what} must be a build-time constant (an initializer)")
    if g.t(node.inputs[1]).size != n * nb * block * bits // 8:
        raise bad(node, f"B {list(in_shape(node, g, 1))} is not [N={n}, {nb}, "
                        f"{block * bits // 8}]")
    if g.t(node.inputs[2]).size != n * nb or g.t(node.inputs[2]).dtype != F32:
        raise bad(node, f"scales {list(in_shape(node, g, 2))}: {n * nb} float32 expected")
    zp = opt_input(node, 3)
    if zp and (not g.is_const(zp) or g.t(zp).dtype not in (np.uint8, F32)):
        raise bad(node, "zero_points must be a constant of uint8 (packed) or float32")
    if opt_input(node, 4):
        raise bad(node, "g_idx (act-order) is not supported")
    if opt_input(node, 5) and tuple(in_shape(node, g, 5)) != (n,):
        raise bad(node, f"bias {list(in_shape(node, g, 5))} must be [N={n}]")
    # accuracy_level 4: onnxruntime computes with int8 activations (per block, amax / 127),
    # except with float zero points, which only its float path takes; a GGUF file's Q4_K
    # and Q4_1 (rvvkit/llm/gguf/graph.py) ask for int8 activations with them too, as
    # llama.cpp quantizes activations for every block format (INT8_ACTIVATIONS)
    zp_kind = "" if not zp else ("u8" if g.t(zp).dtype == np.uint8 else "f32")
    a.update(K=k, N=n, bits=bits, block_size=block, zp_kind=zp_kind,
             int8_act=int(a.get("accuracy_level", 0)) == 4 and
             (zp_kind != "f32" or bool(a.get(INT8_ACTIVATIONS, 0))))
    return [(tuple(x[:-1]) + (n,), F32)]


def _gqa_eval(node, xs):
    """numpy GroupQueryAttention (the C kernel's meaning, one batch row at a time)."""
    a = node.attrs
    nh, kvh, hd = a["heads"], a["kv_heads"], a["head"]
    q, k, v = (np.asarray(t, np.float64) for t in xs[:3])
    kc, vc = np.array(xs[3], np.float32), np.array(xs[4], np.float32)
    batch, seq = q.shape[:2]
    out = np.zeros((batch, seq, nh * hd), np.float32)
    for b in range(batch):
        past = int(xs[5][b]) + 1 - seq
        qb = q[b].reshape(seq, nh, hd)
        kb, vb = k[b].reshape(seq, kvh, hd), v[b].reshape(seq, kvh, hd)
        if a["rotary"]:
            pos = past + np.arange(seq)
            qb, kb = (_rotate(t, xs[7][pos], xs[8][pos], a["interleaved"]) for t in (qb, kb))
        kc[b, :, past:past + seq] = kb.transpose(1, 0, 2)
        vc[b, :, past:past + seq] = vb.transpose(1, 0, 2)
        for s in range(seq):
            live = past + s + 1
            for h in range(nh):
                kv = h // (nh // kvh)
                sc = kc[b, kv, :live].astype(np.float64) @ qb[s, h] * a["scale"]
                p = np.exp(sc - sc.max())
                out[b, s, h * hd:(h + 1) * hd] = (p / p.sum()) @ vc[b, kv, :live]
    return [out, kc, vc]


def _rotate(x, cos, sin, interleaved: bool):
    """x [S, heads, head] rotated by per-position cos/sin [S, head / 2]."""
    half = cos.shape[-1]
    i1 = np.arange(0, 2 * half, 2) if interleaved else np.arange(half)
    i2 = i1 + 1 if interleaved else i1 + half
    c, s, y = cos[:, None], sin[:, None], x.copy()
    y[..., i1] = c * x[..., i1] - s * x[..., i2]
    y[..., i2] = s * x[..., i1] + c * x[..., i2]
    return y


_GQA_DEFAULTS = {"local_window_size": -1, "softcap": 0.0, "smooth_softmax": 0,
                 "qk_output": 0}


@register(MS + "GroupQueryAttention", _gqa_eval, dtypes=("float32", "int32"),
          data_error="the cache length (seqlens_k + 1) is outside the new tokens .. the "
                     "cache bound, or past the rotary cos/sin cache")
def _gqa(node, g):
    a = node.attrs
    nh, kvh = int(a.get("num_heads", 0)), int(a.get("kv_num_heads", 0))
    if len(node.inputs) < 3 or not node.inputs[1] or not node.inputs[2]:
        # frontend/packed_qkv.py splits a packed query whose width the graph states
        raise bad(node, "Q, K and V packed in the query input, whose width the graph does not "
                        "state (a MatMulNBits, a MatMul with constant weights or a bias "
                        "making it): re-export with separate q/k/v inputs")
    q, k, v = (in_shape(node, g, i) for i in range(3))
    if nh <= 0 or kvh <= 0 or nh % kvh:
        raise bad(node, f"num_heads {nh} must be a multiple of kv_num_heads {kvh}")
    for key, default in _GQA_DEFAULTS.items():
        if a.get(key, default) != default:
            raise bad(node, f"attribute {key}={a[key]} is not supported")
    if len(q) != 3 or q[2] % nh or len(k) != 3 or tuple(k) != tuple(v):
        raise bad(node, f"query {list(q)}, key {list(k)}, value {list(v)}: packed QKV and "
                        "unequal key/value shapes are not supported")
    hd = q[2] // nh
    if k[2] != kvh * hd or k[:2] != q[:2]:
        raise bad(node, f"key {list(k)} must be [{q[0]}, {q[1]}, {kvh * hd}]")
    past = in_shape(node, g, 3)
    if len(past) != 4 or past[0] != q[0] or past[1] != kvh or past[3] != hd or \
            tuple(in_shape(node, g, 4)) != tuple(past):
        raise bad(node, f"past key/value {list(past)}, {list(in_shape(node, g, 4))}: "
                        f"[{q[0]}, {kvh}, max_seq, {hd}] caches (BNSH) are needed")
    if tuple(in_shape(node, g, 5)) != (q[0],) or g.t(node.inputs[5]).dtype != I32:
        raise bad(node, f"seqlens_k must be int32 [{q[0]}]")
    rotary = int(a.get("do_rotary", 0))
    if rotary:
        cos = in_shape(node, g, 7) if opt_input(node, 7) else ()
        if len(cos) != 2 or cos[1] * 2 > hd or tuple(in_shape(node, g, 8)) != tuple(cos):
            raise bad(node, f"do_rotary needs cos/sin caches [max_position, <= {hd // 2}]")
    a.update(heads=nh, kv_heads=kvh, head=hd, max_seq=int(past[2]), rotary=rotary,
             interleaved=int(a.get("rotary_interleaved", 0)),
             scale=float(a.get("scale", 0.0)) or float(hd) ** -0.5)
    return [(tuple(q), F32), (tuple(past), F32), (tuple(past), F32)][:len(node.outputs)]


@register(MS + "MultiHeadAttention", dtypes=("float32",),
          without_kernel="3-D q/k/v with an additive bias: written out as MatMul, Softmax and "
                         "MatMul by the frontend (frontend/ms_attention.py)")
def _ms_mha(node, g):
    """Only the form frontend/ms_attention.py writes out reaches rvvkit; any other is here."""
    raise bad(node, "only 3-D query/key/value (with an additive attention bias, no packed "
                    "inputs, padding mask, past/present or unidirectional) are supported")


@register(MS + "RotaryEmbedding", dtypes=("float32", "int64"),
          without_kernel="becomes RotaryEmbedding (the opset-23 op, its inputs reordered)")
def _ms_rope(node, g):
    """onnxruntime's RotaryEmbedding (input, position_ids, cos_cache, sin_cache) is the ONNX
    opset-23 op with its inputs in another order: the node becomes that op (one kernel, one
    meaning), with num_heads derived from the caches where a 3-D input leaves it out."""
    from ..transformer_extra import _rope
    x = in_shape(node, g, 0)
    pos = in_shape(node, g, 1)
    if len(pos) != 2 or g.t(node.inputs[1]).dtype != np.int64:
        raise bad(node, f"position_ids {list(pos)}: int64 [batch, seq] expected (the packed "
                        "one-offset form is not supported)")
    if float(node.attrs.pop("scale", 1.0)) != 1.0 or node.attrs.pop("is_packed_batching", 0):
        raise bad(node, "scale != 1 and packed batching are not supported")
    cos = in_shape(node, g, 2)
    if len(x) == 3 and not node.attrs.get("num_heads") and len(cos) == 2 and cos[1]:
        node.attrs["num_heads"] = x[2] // (2 * cos[1])
    node.inputs = [node.inputs[0], node.inputs[2], node.inputs[3], node.inputs[1]]
    node.op = "RotaryEmbedding"
    return _rope(node, g)
