"""`rvvkit quantize`: float MatMul weights of an ONNX model to 4- or 8-bit MatMulNBits."""
from __future__ import annotations

import argparse
import os

from ..measure.report import human_bytes
from .common import count, progress


def _bits(text: str) -> int:
    if text not in ("int4", "int8"):
        raise argparse.ArgumentTypeError(f"expected int4 or int8, got {text!r}")
    return int(text[3:])


def _block(text: str) -> int:
    n = count(16)(text)
    if n & (n - 1):
        raise argparse.ArgumentTypeError(f"expected a power of two >= 16, got {text!r}")
    return n


def cmd_quantize(args) -> int:
    from ..frontend.onnx import load_model
    from ..llm.quantize import quantize_model
    model, rep = quantize_model(load_model(args.model), args.weights, args.block,
                                args.zero_points, args.exclude or (), args.accuracy,
                                args.embeddings, args.scales == "bf16")
    out = args.output or os.path.splitext(args.model)[0] + f"_int{args.weights}.onnx"
    import onnx
    tmp = out + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, out)   # a half-written model is never left under the name asked for
    emb = f" and {rep.embeddings} embedding tables" if args.embeddings else ""
    progress(f"{rep.converted} MatMul weights{emb} to int{args.weights} blocks of "
             f"{args.block}: {human_bytes(rep.bytes_before)} -> {human_bytes(rep.bytes_after)}"
             + (f"; {len(rep.skipped)} MatMul kept float" if rep.skipped else ""))
    progress(f"wrote {out}")
    return 0


def add_parser(sub) -> None:
    q = sub.add_parser("quantize", help="quantize float MatMul weights to 4/8-bit blocks",
                       description="Rewrite every MatMul with a float32 initializer weight as "
                       "a com.microsoft MatMulNBits (weight-only, block-wise; activations stay "
                       "float), the form onnxruntime-genai writes. Build the result as usual.")
    q.add_argument("model", help="ONNX model file")
    q.add_argument("-o", "--output", help="the quantized model (default: <model>_int4.onnx)")
    q.add_argument("--weights", type=_bits, default=4, metavar="int4|int8",
                   help="bits per weight (default int4)")
    q.add_argument("--block", type=_block, default=32,
                   help="weights per scale along K, a power of two (default 32)")
    q.add_argument("--zero-points", action="store_true",
                   help="asymmetric blocks with a zero point each (default symmetric)")
    q.add_argument("--accuracy", type=int, default=0, choices=[0, 4],
                   help="MatMulNBits accuracy_level: 0 float activations (default), 4 int8 "
                        "activations per block, as onnxruntime-genai writes for CPUs "
                        "(faster; onnxruntime computes it the same way)")
    q.add_argument("--embeddings", action="store_true",
                   help="token embeddings too: each Gather of a float32 [rows, K] table "
                        "becomes a com.microsoft GatherBlockQuantized at the same bits and "
                        "block (symmetric), the table's float copy dropped unless another node "
                        "reads it")
    q.add_argument("--scales", choices=["bf16", "float32"], default="bf16",
                   help="bf16 (default): each block's scale rounded up to a bfloat16 value, "
                        "still float32 in the model (onnxruntime reads it unchanged) and "
                        "stored in 16 bits in the artifact, 4.5 bits a weight at block 32; "
                        "float32: scales as computed (5 bits a weight)")
    q.add_argument("--exclude", action="append", metavar="NAME",
                   help="keep this MatMul node or weight float (repeatable)")
    q.set_defaults(func=cmd_quantize, parser=q)
