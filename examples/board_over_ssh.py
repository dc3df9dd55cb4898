"""Run a model on a RISC-V board over SSH. The board needs a Linux shell, a C compiler and an
SSH server: no Python there. rvvkit logs in (paramiko), uploads the artifact and the runner's
C source, compiles both on the board with the board's own compiler (cached there by content),
runs, and brings the outputs and per-step timings back.

Needs: rvvkit with onnx, onnxruntime and paramiko (`pip install -e .[dev]`), and a board:
  - an address `ssh://[user@]host[:port]`, whose host key is in ~/.ssh/known_hosts (or add
    `?trust_new_host=1` to accept it the first time) and which takes your SSH key; or
  - a board name: a `Host` of ~/.ssh/config (or of $RVVKIT_SSH_CONFIG), with a table of the
    same name in ~/.config/rvvkit/boards.toml (or $RVVKIT_BOARDS) for what SSH cannot say
    (compiler, cflags, workdir, a wrapper such as qemu-riscv64). See the README's "Boards
    over SSH".
No board at hand? `bash scripts/debian_board.sh build` (as root) makes an emulated Debian
riscv64 board with GCC 14 and `... start PORT KEY.pub` serves it on 127.0.0.1:PORT.

Run:    python3 examples/board_over_ssh.py BOARD [--out DIR]
        BOARD: e.g. ssh://debian@10.0.0.7:2222 or k1-board; default $BOARD
        (DIR, else $OUTDIR, else a new temporary directory, receives model.onnx, model.rvv)

The same from the command line: `rvvkit doctor --on ssh://BOARD` (compilers, RVV, VLEN),
`rvvkit run model.rvv --on ssh://BOARD --inputs in.npz --output out.npz --profile`.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

import rvvkit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_model import sample_inputs, tiny_cnn  # noqa: E402  (the examples' tiny model)


def main() -> int:
    p = argparse.ArgumentParser(description="run a model on a board over SSH")
    p.add_argument("board", nargs="?", default=os.environ.get("BOARD"),
                   help="ssh://[user@]host[:port] or a board name (default: $BOARD)")
    p.add_argument("--out", default=os.environ.get("OUTDIR") or tempfile.mkdtemp(
        prefix="rvvkit-board-"), help="directory for the files this writes")
    args = p.parse_args()
    if not args.board:
        p.error("name a board: an ssh:// address or a board name (or set $BOARD)")
    # A board name is the host part of an address: k1-board -> ssh://k1-board.
    board = args.board if args.board.startswith("ssh://") else f"ssh://{args.board}"
    os.makedirs(args.out, exist_ok=True)

    # 1. Model and artifact, made here: building needs onnx, the board needs neither.
    model_path = os.path.join(args.out, "model.onnx")
    onnx.save(tiny_cnn(), model_path)
    art_path = os.path.join(args.out, "model.rvv")
    rvvkit.build(model_path, cuda=False).save(art_path)
    feeds = sample_inputs()

    # 2. Open a session on the board. This connects (host key checked against known_hosts),
    #    probes the board's compiler, and compiles the runner and the kernels there unless
    #    the board's cache has them. Failures are one-line exceptions: BoardConnectionError
    #    (unreachable, login refused, unknown host key), CompileError (the board's stderr).
    print(f"connecting to {board} ...", flush=True)
    try:
        sess = rvvkit.load(art_path, on=board)
    except rvvkit.BoardConnectionError as exc:
        print(f"cannot reach the board: {exc}", file=sys.stderr)
        return 1
    with sess:
        d = sess.describe()
        print(f"session: {d['label']}")
        if sess.compiler is not None:   # None: the artifact's precompiled kernels run
            version = sess.compiler.version.splitlines()[0]
            march = [f for f in sess.flags if f.startswith(("-march", "-mcpu"))]
            print(f"  the board runs {d['machine'] or '?'}; its compiler: {version} "
                  f"{' '.join(march)}")

        # 3. Run: inputs go up as .npy files, outputs come back as numpy arrays.
        got = sess.run(feeds)
        ref = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        names = [o.name for o in ref.get_outputs()]
        want = dict(zip(names, ref.run(names, feeds)))
        err = max(float(np.max(np.abs(got[n] - want[n]))) for n in names)
        same = int(np.argmax(got["probs"])) == int(np.argmax(want["probs"]))
        print(f"max abs error vs onnxruntime {err:.2e}, class {int(np.argmax(got['probs']))} "
              f"({'same' if same else 'DIFFERENT'} as onnxruntime)")

        # 4. Time it on the board's own clock (under an emulating wrapper such as
        #    qemu-riscv64, that is emulation speed, not a real board's), and per step.
        m = sess.measure(feeds, repeat=5, warmup=1)
        print(f"latency on the board: {m['latency_ms']:.3f} ms ({m['latency_stat']} of "
              f"{m['runs']} runs)")
        for r in sorted(sess.profile(feeds, repeat=5), key=lambda r: -r["seconds"])[:3]:
            print(f"  {r['kernel']:<20} {r['op']:<12} {1e6 * r['seconds']:9.1f} us")
    # Closing the session removed the board's temporary directory; the compiled runner and
    # kernels stay in its cache (`rvvkit boards clean` empties it).
    if err > 1e-4 or not same:
        print("MISMATCH", file=sys.stderr)
        return 1
    print(f"OK: files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
