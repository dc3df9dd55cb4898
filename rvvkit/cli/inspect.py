"""`rvvkit inspect`: an artifact's sections, I/O, kernels and memory (or its C / CUDA)."""
from __future__ import annotations

import json
import math
import sys
from typing import Dict

import numpy as np

from ..artifact.container import TOKENIZER
from ..errors import RvvkitError
from ..measure.report import human_bytes, table
from .npz import printable


def _dims(shape) -> str:
    return "x".join(map(str, shape))


def _signature_line(sig) -> str:
    if sig is None:
        return "signature: none"
    if sig["alg"] is None:
        return f"signature: unreadable: {sig['problem']}"
    # Valid against the key the section names: trust in that key is --require-signature's.
    state = {True: "valid", False: "DOES NOT VERIFY (changed after signing?)",
             None: f"not checked: {sig['problem']}"}[sig["verifies"]]
    return (f"signature: {sig['alg']}, key id {sig['key_id']}: {state}\n"
            f"  public key {sig['public_key']}")


def _print_decoder(meta, extra=()) -> None:
    """A decoder's caches (session state, updated in place), the roles generate uses and
    what it carries for text (a GGUF file's tokenizer, eos ids, chat template)."""
    state, dec = meta.get("state") or [], meta.get("decoder")
    if not state:
        return
    total = sum(np.dtype(s["dtype"]).itemsize * math.prod(s["shape"]) for s in state)
    print(f"\nkey/value caches: {len(state)} in the session ({human_bytes(total)}), each "
          f"{_dims(state[0]['shape'])}, updated in place (no past/present I/O)")
    if dec:
        # where the live length comes from: the lengths input, else the mask, else positions
        live = next((f"{role} {printable(dec[key])}" for key, role in
                     (("seqlens", "cache length"), ("mask", "attention mask"),
                      ("positions", "position ids")) if dec.get(key)), "?")
        print(f"generation: ids {printable(dec['ids'])}, {live}, logits "
              f"{printable(dec['logits'])}; bound {dec['max_seq']} positions, vocabulary "
              f"{dec['vocab']} (rvvkit generate)")
        carried = [what for what, there in (
            ("tokenizer", TOKENIZER in extra), ("chat template", dec.get("chat_template")))
            if there]
        if dec.get("eos"):
            carried.append(f"end-of-text ids {dec['eos']} (from {dec.get('eos_from', '?')})")
        if carried:
            print(f"carries: {printable(', '.join(carried))}")
    pre = meta.get("prefill")
    if isinstance(pre, dict):
        print(f"prefill plan: {pre.get('tokens', '?')} prompt tokens per call, "
              f"{len(pre.get('plan', []))} steps, same weights and caches (no logits)")
    elif dec:
        print("prefill plan: none (prompts run a token at a time)")


def _print_summary(path: str, art, sig) -> None:
    # Names come from the model file: printed through printable() (no terminal escapes);
    # optional facts absent from an artifact print as "?".
    meta, p = art.meta, printable
    print(f"{p(path)}: model {p(str(meta.get('model', '?')))!r}, format "
          f"{meta['format_version']}, {p(str(meta.get('producer', '?')))}")
    print("\nsections:")
    print(table(["name", "offset", "size", "sha256"],
                [[p(s["name"]), s["offset"], s["size"], s["sha256"][:16]]
                 for s in art.sections()]))
    print(_signature_line(sig))
    for key in ("inputs", "outputs"):
        print(f"\n{key}:")
        print(table(["name", "shape", "dtype"],
                    [[p(t["name"]), _dims(t["shape"]), t.get("dtype", "float32")]
                     for t in meta[key]]))
    _print_decoder(meta, art.extra)
    uses: Dict[str, int] = {}
    for s in meta["plan"]:
        uses[s["kernel"]] = uses.get(s["kernel"], 0) + 1
    kernels = meta.get("kernels", [])
    print(f"\nkernels: {len(kernels)} distinct, {len(meta['plan'])} steps")
    print(table(["kernel", "calls", "MACs/call", "workspace"],
                [[p(k["name"]), uses.get(k["name"], 0), k.get("macs", "?"),
                  human_bytes(4 * k.get("workspace_floats", 0))] for k in kernels]))
    mem = meta["memory"]
    arena, low = 4 * mem["arena_floats"], mem.get("lower_bound_bytes")
    print(f"\nmemory: arena {human_bytes(arena)} ({arena} bytes), lower bound "
          + (f"{human_bytes(low)} ({low} bytes)" if isinstance(low, int) else "?")
          + f", weights {human_bytes(len(art.weights))}")
    if isinstance(meta.get("macs"), int):
        print(f"compute: {meta['macs'] / 1e6:.1f} M multiply-accumulates per inference")


def cmd_inspect(args) -> int:
    from ..artifact.container import Artifact
    from ..artifact.signing import describe
    art = Artifact.load(args.artifact).check_model()
    sig = describe(art, args.artifact)
    if args.source:
        sys.stdout.write(art.c_source)
    elif args.cuda_source:
        if art.cu_source is None:
            why = (art.meta.get("cuda") or {}).get("reason", "built without it")
            raise RvvkitError(f"{args.artifact} has no CUDA source: {why}")
        sys.stdout.write(art.cu_source)
    elif args.json:
        json.dump(dict(art.meta, sections=art.sections(), signature=sig), sys.stdout,
                  indent=1)
        sys.stdout.write("\n")
    else:
        _print_summary(args.artifact, art, sig)
    return 0


def add_parser(sub) -> None:
    i = sub.add_parser("inspect", help="show an artifact's sections, I/O, kernels and memory")
    i.add_argument("artifact")
    g = i.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="machine-readable meta + sections")
    g.add_argument("--source", action="store_true", help="print the generated C")
    g.add_argument("--cuda-source", action="store_true",
                   help="print the generated CUDA (the same plan, run by --on cuda)")
    i.set_defaults(func=cmd_inspect, parser=i)
