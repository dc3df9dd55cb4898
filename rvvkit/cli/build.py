"""`rvvkit build`: an ONNX model (or a llama.cpp GGUF file) to an artifact (.rvv)."""
from __future__ import annotations

import os

from ..codegen.precision import PRECISIONS
from ..llm.decoder import PREFILL_TOKENS
from ..measure.report import human_bytes
from .common import count, input_shape, progress, shapes, vlen
from .sign import signer


def cmd_build(args) -> int:
    from ..builder import build_model
    out = args.output or os.path.splitext(os.path.basename(args.model))[0] + ".rvv"
    say = (lambda _m: None) if args.quiet else progress
    sign = signer(args.sign)
    art = build_model(args.model, input_shapes=shapes(args.input_shape),
                      opt_level=args.opt_level, vlen=args.vlen, max_seq=args.max_seq,
                      prefill=args.prefill, precision=args.precision,
                      cache_inputs=args.cache_inputs, cache_outputs=args.cache_outputs,
                      progress=say)
    if args.precompile:
        from ..precompile import pack, parse_targets
        art = pack(art, parse_targets(args.precompile), progress=say)
    kid = sign(art)  # in memory, so that the one atomic save writes the signed file
    art.save(out)
    mem = art.meta["memory"]
    say(f"wrote {out} ({human_bytes(os.path.getsize(out))}: weights "
        f"{human_bytes(mem['weights_bytes'])}, arena {human_bytes(mem['arena_bytes'])})"
        + (f", signed with ed25519 key {kid}" if kid else ""))
    return 0


def add_parser(sub) -> None:
    b = sub.add_parser("build", help="lower an ONNX model or a GGUF file to an artifact (.rvv)")
    b.add_argument("model", help="ONNX model file, or a llama.cpp GGUF file (llama, qwen2, "
                   "qwen3 decoders; needs --max-seq; its tokenizer is stored in the artifact)")
    b.add_argument("-o", "--output", help="artifact path (default: <model>.rvv)")
    b.add_argument("--input-shape", action="append", type=input_shape, metavar="NAME=D0,D1,...",
                   help="static shape for an input with symbolic dimensions (repeatable)")
    b.add_argument("--max-seq", type=count(1), metavar="N",
                   help="a decoder's key/value cache bound in positions (prompt + generated "
                        "tokens); its symbolic batch and new-token dimensions become 1")
    b.add_argument("--prefill", type=count(0), default=PREFILL_TOKENS, metavar="N",
                   help="with --max-seq: also plan a prefill step that takes N prompt tokens "
                        f"per call, sharing weights and caches (default {PREFILL_TOKENS}; 0 "
                        "or 1: prompts run a token at a time)")
    b.add_argument("--cache-inputs", metavar="NAMES", help="with --max-seq: the key/value "
                   "cache inputs, comma-separated names or shell patterns (e.g. 'kv_in_*'), "
                   "where rvvkit does not find them (it takes rank-4 inputs named past*/"
                   "...cache..., or read as a past key/value)")
    b.add_argument("--cache-outputs", metavar="NAMES", help="the present key/value outputs "
                   "(names or patterns): the build fails unless each is kept in place")
    b.add_argument("-O", "--opt-level", type=int, default=2, choices=[0, 1, 2],
                   help="0: no folding/fusion, 1: fold BatchNorm/affine, 2: + fusion (default)")
    b.add_argument("--vlen", type=vlen, default=None, metavar="BITS",
                   help="the target board's VLEN (128..1024): emit only the RVV micro-kernel "
                        "variant fitted to it (smaller source; still correct, only slower, at "
                        "other VLENs). Default: RVV code for any VLEN")
    b.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="fp32 (default); auto: also float16 forms of the kernels that have "
                        "one (1x1 convs), used where the compiler targets Zvfh (e.g. --isa k1), "
                        "float32 elsewhere; fp16: only those forms (compiles only for Zvfh)")
    b.add_argument("--sign", metavar="KEY", help="sign the artifact with this ed25519 private "
                   "key (OpenSSH or PEM; an encrypted key's passphrase from "
                   "RVVKIT_SIGN_PASSPHRASE)")
    b.add_argument("--precompile", metavar="TARGETS", help="also store kernels and runner "
                   "compiled here for riscv64 and/or this machine (e.g. riscv64,x86_64), for "
                   "targets without a compiler")
    b.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    b.set_defaults(func=cmd_build, parser=b)
