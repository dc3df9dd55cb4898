"""An equivalent ncnn form of a converted model for the VLENs where pnnx's form is wrong.

ncnn 1.0.20260526's RISC-V Gemm kernel (src/layer/riscv/gemm_riscv.cpp, the packed tile) has
code for packn 8 and 4 only, that is VLEN 256 and 128; at VLEN 512 and 1024 it logs
"unsupported vector length" for each tile and leaves the output unwritten, so every model pnnx
lowers to Gemm layers (a transformer's Linear layers) is wrong there. The same product with a
constant weight and a per-column bias is what ncnn's InnerProduct layer computes on a 2-D input
(one row per token), with a kernel written for any VLEN, so the peer benchmark counts that form
where pnnx's is wrong, and says so in its table.

Only the layer types of the models the benchmark converts are sized; any other layer with
weights stops the rewrite (PeerError) rather than misreading the weight file.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

from peer_ncnn_build import PeerError
from peer_ncnn_models import current_record, digest, param_layers

# Layers that read nothing from the weight file (BinaryOp: a scalar operand is a parameter, a
# second operand a blob).
NO_WEIGHTS = {"Input", "Split", "Reshape", "Permute", "MatMul", "Softmax", "GELU", "Flatten",
              "Concat", "Slice", "Crop", "Squeeze", "ExpandDims", "Sigmoid", "ReLU", "Swish",
              "BinaryOp"}
TAG = 4         # a weight read with type 0 starts with a 4-byte tag (0: plain float32)


def _params(tokens) -> dict:
    """{id: value text} of a layer's k=v parameters (_int reads the integer ones)."""
    out = {}
    for t in tokens:
        k, _, v = t.partition("=")
        out[int(k)] = v
    return out


def _int(v, default: int = 0) -> int:
    return int(v) if v is not None else default


def _gemm_parts(p: dict) -> list:
    """[(tagged, floats)] Gemm::load_model reads, in order."""
    m, n, k = (_int(p.get(i)) for i in (7, 8, 9))
    parts = []
    if _int(p.get(4)):
        parts.append((True, m * k))
    if _int(p.get(5)):
        parts.append((True, n * k))
    bct = _int(p.get(10))
    if _int(p.get(6)) and bct != -1:
        parts.append((True, {0: 1, 1: m, 2: m, 3: m * n, 4: n}[bct]))
    return parts


def _layer_parts(kind: str, p: dict) -> list:
    if kind in NO_WEIGHTS:
        return []
    if kind == "Gemm":
        return _gemm_parts(p)
    if kind == "LayerNorm":
        a = _int(p.get(0))
        return [(False, a), (False, a)] if _int(p.get(2), 1) else []
    if kind == "MemoryData":
        w, h, d, c = (_int(p.get(i)) for i in (0, 1, 11, 2))
        size = w * max(h, 1) * max(d, 1) * max(c, 1)
        return [(_int(p.get(21), 1) == 0, size)]
    raise PeerError(f"cannot size the weights of ncnn layer type {kind} for the rewrite")


def _as_innerproduct(name: str, ins: list, outs: list, p: dict):
    """The InnerProduct line for a Gemm line, or None when the Gemm is not y = x B^T + c with
    a constant B (N x K) and a per-column or no c."""
    if (_int(p.get(2)) or _int(p.get(4)) or not _int(p.get(5))
            or _int(p.get(3)) != 1 or _int(p.get(14)) or _int(p.get(18))):
        return None
    has_c = _int(p.get(6)) and _int(p.get(10)) != -1
    if has_c and _int(p.get(10)) != 4:
        return None
    n, k = _int(p.get(8)), _int(p.get(9))
    head = ["InnerProduct", name, str(len(ins)), str(len(outs))] + ins + outs
    return head + [f"0={n}", f"1={int(bool(has_c))}", f"2={n * k}"], bool(has_c)


def gemm_as_innerproduct(param: Path, binf: Path, out: Path) -> dict:
    """Writes out/model.ncnn.param/.bin with every eligible Gemm layer an InnerProduct;
    returns {"param", "bin", "rewritten"} (cached by the inputs' bytes)."""
    src_p, src_b = param.read_bytes(), binf.read_bytes()
    key = digest(src_p, src_b, Path(__file__).read_bytes())
    meta = out / "form.json"
    done = current_record(meta, key)
    if done:
        return done
    lines = src_p.decode().splitlines()
    pos, new_bin, rewritten = 0, bytearray(), 0
    for i, kind, name, ins, outs, tokens in param_layers(src_p.decode()):
        p = _params(tokens)
        chunks = []
        for tagged, count in _layer_parts(kind, p):
            size = (TAG if tagged else 0) + 4 * count
            chunk = src_b[pos:pos + size]
            if len(chunk) != size:
                raise PeerError(f"{binf}: weights end inside layer {name}")
            chunks.append(chunk)
            pos += size
        ip = _as_innerproduct(name, ins, outs, p) if kind == "Gemm" else None
        if ip is None:
            new_bin += b"".join(chunks)
            continue
        line, has_c = ip
        w = chunks[0]
        if struct.unpack("<I", w[:TAG])[0] != 0:
            raise PeerError(f"{name}: weights are not plain float32 (tag {w[:TAG].hex()})")
        new_bin += w
        if has_c:
            new_bin += chunks[1][TAG:]      # InnerProduct reads its bias untagged
        lines[i] = " ".join(line)
        rewritten += 1
    if pos != len(src_b):
        raise PeerError(f"{binf}: {len(src_b) - pos} bytes left after the last layer")
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.ncnn.param").write_text("\n".join(lines) + "\n")
    (out / "model.ncnn.bin").write_bytes(bytes(new_bin))
    done = {"key": key, "param": str(out / "model.ncnn.param"),
            "bin": str(out / "model.ncnn.bin"), "rewritten": rewritten}
    meta.write_text(json.dumps(done))
    return done
