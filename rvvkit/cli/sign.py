"""`rvvkit sign`: sign an existing artifact with an ed25519 key; and the --require-signature
option that run, bench and compare share (rvvkit.artifact.signing does the work)."""
from __future__ import annotations

from typing import Optional

from ..artifact.signing import PASSPHRASE_ENV, REQUIRE_ENV, required_key
from .common import UsageError, progress

REQUIRE_HELP = (f"refuse the artifact unless it is signed by this ed25519 public key (a .pub "
                f"or PEM file, or its 64 hex digits), before compiling anything; default "
                f"{REQUIRE_ENV} from the environment")


def add_require_option(p) -> None:
    p.add_argument("--require-signature", metavar="PUBKEY", help=REQUIRE_HELP)


def _is_artifact(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False  # the command's own reading of it reports the problem


def verified(args, path: str, *, models_too: bool = False):
    """The loaded Artifact when a signature is required (--require-signature, else the
    environment) and it verifies; None when none is required, so that the command opens the
    path as it always did. The command then runs this very object, never a second read of the
    file, which could have been swapped in between. models_too: `path` may be an ONNX model
    (compare), which carries no C: the environment's requirement does not apply to it."""
    key = required_key(args.require_signature)
    if key is None:
        return None
    if models_too and not _is_artifact(path):
        if args.require_signature:
            raise UsageError("--require-signature applies to an artifact (.rvv), not to an "
                             "ONNX model, which is built here")
        return None
    from ..artifact.container import Artifact
    from ..artifact.signing import verify_artifact
    art = Artifact.load(path)
    kid = verify_artifact(art, key, path)
    progress(f"{path}: signature by key {kid} verified")
    return art


def cmd_sign(args) -> int:
    from ..artifact.container import Artifact
    from ..artifact.signing import load_private_key, sign_artifact
    key = load_private_key(args.key)  # key problems first, before reading a large artifact
    art = Artifact.load(args.artifact)
    kid = sign_artifact(art, key)
    out = args.output or args.artifact
    art.save(out)  # atomic: the old file or the whole signed one, never a mix
    progress(f"signed {out} with ed25519 key {kid}")
    return 0


def add_parser(sub) -> None:
    s = sub.add_parser("sign", help="sign an artifact with an ed25519 key",
                       description="Sign ARTIFACT with an ed25519 private key (OpenSSH or PEM), "
                       "replacing it atomically (or writing -o). The signature covers every "
                       "byte of the artifact through its hash chain; `run --require-signature "
                       "PUBKEY` (or " + REQUIRE_ENV + ") then refuses anything else. An "
                       "encrypted key's passphrase is read from " + PASSPHRASE_ENV + ".")
    s.add_argument("artifact")
    s.add_argument("--key", required=True, metavar="KEY",
                   help="ed25519 private key: ssh-keygen -t ed25519, or openssl genpkey "
                   "-algorithm ed25519")
    s.add_argument("-o", "--output", help="write the signed artifact here instead")
    s.set_defaults(func=cmd_sign, parser=s)


def signer(key_path: Optional[str]):
    """`build --sign`: the key is opened before the build (a bad key fails in a second, not
    after minutes of building); returns a function that signs the built artifact."""
    if key_path is None:
        return lambda _art: None
    from ..artifact.signing import load_private_key, sign_artifact
    key = load_private_key(key_path)
    return lambda art: sign_artifact(art, key)


__all__ = ["add_parser", "add_require_option", "cmd_sign", "signer", "verified"]
