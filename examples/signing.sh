#!/usr/bin/env bash
# Signed artifacts: an artifact carries C that a board compiles and runs, so a board (or a CI
# job) can insist on knowing who built it. This example makes an ed25519 key, builds a signed
# artifact, checks the signature, runs it with --require-signature, and shows that an artifact
# signed by another key, changed after signing, or not signed at all is refused before
# anything is compiled: exit status 1 and one line saying why.
#
# Needs: rvvkit with onnx and the `sign` extra (cryptography; `pip install -e .[dev]` has
# both), ssh-keygen (OpenSSH client; `openssl genpkey -algorithm ed25519 -out key.pem` makes
# a key rvvkit takes too), a C compiler.
#
# Run:   bash examples/signing.sh [OUTDIR]
#        (OUTDIR, else $OUTDIR, else a new temporary directory, receives keys and artifacts)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-${OUTDIR:-$(mktemp -d -t rvvkit-signing.XXXXXX)}}"
mkdir -p "$OUT"
cd "$OUT"

# expect_refusal CMD...: run CMD, which must fail with exit status 1, and show its one line.
expect_refusal() {
    local status=0
    "$@" 2> refusal.txt > /dev/null || status=$?
    if [ "$status" -ne 1 ]; then
        echo "expected a refusal (exit 1), got exit $status from: $*" >&2
        cat refusal.txt >&2
        exit 1
    fi
    echo "  refused (exit 1): $(tail -n 1 refusal.txt)"
}

echo "== a model and two keys: ours, and someone else's"
python3 "$HERE/tiny_model.py" model.onnx --inputs in.npz
rm -f signer signer.pub other other.pub
ssh-keygen -q -t ed25519 -N "" -C "rvvkit example signer" -f signer   # signer, signer.pub
ssh-keygen -q -t ed25519 -N "" -C "someone else" -f other

echo "== build and sign in one step (rvvkit sign KEY signs an existing artifact instead)"
rvvkit build model.onnx -o model.rvv --sign signer -q
# inspect shows the key id and whether the signature verifies with the key it names; that
# alone says nothing about trust, which is what --require-signature decides.
rvvkit inspect model.rvv | grep -i -A2 "signature"

echo "== run, requiring our key: verified before anything is compiled"
rvvkit run model.rvv --inputs in.npz --output out.npz --require-signature signer.pub
python3 -c "import numpy as np; print('  outputs:', sorted(np.load('out.npz').files))"
# The environment can require it for every run, bench and compare of this shell:
RVVKIT_REQUIRE_SIGNATURE=signer.pub rvvkit run model.rvv --inputs in.npz > /dev/null
echo "  RVVKIT_REQUIRE_SIGNATURE=signer.pub: ran"

echo "== refused: signed, but by another key"
expect_refusal rvvkit run model.rvv --require-signature other.pub

echo "== refused: changed after signing, clumsily (one byte of the weights flipped)"
# Every section's sha256 is in the meta, so damage is caught even without a signature.
python3 - <<'EOF'
from elftools.elf.elffile import ELFFile
data = bytearray(open("model.rvv", "rb").read())
with open("model.rvv", "rb") as f:
    sec = ELFFile(f).get_section_by_name(".rvvkit.weights")
    at = sec["sh_offset"] + sec["sh_size"] - 1
data[at] ^= 0xFF
open("damaged.rvv", "wb").write(data)
EOF
expect_refusal rvvkit run damaged.rvv --require-signature signer.pub

echo "== refused: changed after signing, carefully (C edited, every checksum redone)"
# A consistent file, its hash chain recomputed, the signer's signature kept: only the
# signature, which covers that chain, tells it apart.
python3 - <<'EOF'
from rvvkit.artifact import Artifact
art = Artifact.load("model.rvv")
forged = Artifact(art.meta, art.c_source + "\n/* code the signer never saw */\n",
                  art.weights, art.cu_source, art.extra)
forged.signature = art.signature     # the signature over the original bytes
forged.save("forged.rvv")            # save() writes fresh sha256s for every section
EOF
expect_refusal rvvkit run forged.rvv --require-signature signer.pub

echo "== refused: not signed at all"
rvvkit build model.onnx -o unsigned.rvv -q
expect_refusal rvvkit run unsigned.rvv --require-signature signer.pub

# The same from Python: rvvkit.load("model.rvv", require_signature="signer.pub") raises
# rvvkit.SignatureError for each of the three.
echo "OK: files in $OUT"
