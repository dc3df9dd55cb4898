"""Optional ed25519 signatures of artifacts: an artifact carries C code that is compiled and run,
so a board or a CI job can insist that it comes from a known key.

What is signed: the exact bytes of .rvvkit.check, behind a domain-separation prefix. That
section holds the sha256 of .rvvkit.meta and .shstrtab, and the meta holds the sha256 of every
other section, so one signature covers every payload byte (rvvkit/artifact/container.py). The
signature lives in .rvvkit.sig, outside that chain (it signs the chain), as compact JSON:
{"alg": "ed25519", "key_id": ..., "public_key": hex, "signature": hex}; key_id is the first 16
hex digits of sha256 of the raw 32-byte public key, for people: trust compares whole keys.

Keys: OpenSSH (`ssh-keygen -t ed25519`: the private key file, the .pub line) or PEM/PKCS8
(`openssl genpkey -algorithm ed25519`, `openssl pkey -pubout`). An encrypted private key is
opened with the passphrase in RVVKIT_SIGN_PASSPHRASE, never from the command line (where it
would show in `ps` and shell history). `cryptography` is imported only here, and only when a
signature is made or checked: unsigned artifacts need nothing more than before."""
from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Dict, Optional, Union

from .container import SIG, Artifact
from ..errors import SignatureError

DOMAIN = b"rvvkit-artifact-signature-v1\0"  # a signature over anything else never verifies here
ALG = "ed25519"
PASSPHRASE_ENV = "RVVKIT_SIGN_PASSPHRASE"
REQUIRE_ENV = "RVVKIT_REQUIRE_SIGNATURE"
_HOW = "use an ed25519 key (ssh-keygen -t ed25519, or openssl genpkey -algorithm ed25519)"
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise SignatureError("signing artifacts needs the 'cryptography' package: "
                             "pip install 'rvvkit[sign]'") from None
    return serialization, ed25519, InvalidSignature, UnsupportedAlgorithm


def key_id(raw_public: bytes) -> str:
    return hashlib.sha256(raw_public).hexdigest()[:16]


def _raw(public_key) -> bytes:
    serialization = _crypto()[0]
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _kind(key) -> str:
    """A refused key's type in words: "RSA", "ECDSA (secp256r1)", ..."""
    name = type(key).__name__.replace("PrivateKey", "").replace("PublicKey", "").lstrip("_")
    name = {"EC": "ECDSA", "EllipticCurve": "ECDSA"}.get(name, name)
    curve = getattr(key, "curve", None)
    return f"{name} ({curve.name})" if curve is not None else name


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise SignatureError(f"cannot read {what} {path}: {exc.strerror}") from None


def load_private_key(path: Union[str, os.PathLike]):
    """An Ed25519PrivateKey from an OpenSSH or PEM/PKCS8 (or DER) file; SignatureError with
    what to do for any other key type, a public key, or an encrypted key without (or with the
    wrong) RVVKIT_SIGN_PASSPHRASE."""
    serialization, ed25519, _, unsupported = _crypto()
    path = os.fspath(path)
    data = _read(path, "signing key")
    if data.lstrip().startswith((b"ssh-", b"ecdsa-", b"-----BEGIN PUBLIC KEY")):
        raise SignatureError(f"{path} is a public key: signing needs the private key")
    if b"-----BEGIN OPENSSH PRIVATE KEY" in data:
        load = serialization.load_ssh_private_key
    elif b"-----BEGIN" in data:
        load = serialization.load_pem_private_key
    else:
        load = serialization.load_der_private_key
    passphrase = os.environ.get(PASSPHRASE_ENV)
    try:
        try:  # first without: a passphrase offered to a plain key is an error in cryptography
            key = load(data, None)
        except TypeError:  # encrypted (cryptography's way of saying "needs a password")
            if not passphrase:
                raise SignatureError(f"{path}: the private key is encrypted: set "
                                     f"{PASSPHRASE_ENV} to its passphrase (it is never taken "
                                     "on the command line)") from None
            try:
                key = load(data, passphrase.encode("utf-8"))
            except ValueError:
                raise SignatureError(f"{path}: cannot decrypt the private key with "
                                     f"{PASSPHRASE_ENV} (wrong passphrase?)") from None
    except (ValueError, unsupported) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SignatureError(f"{path}: not a usable private key ({first}); {_HOW}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SignatureError(f"{path}: {_kind(key)} key: rvvkit signs with ed25519 keys only; "
                             f"{_HOW}")
    return key


def load_public_key(spec: Union[str, os.PathLike, bytes]) -> bytes:
    """The raw 32-byte ed25519 public key named by `spec`: a file (an OpenSSH .pub line or a
    PEM public key), or inline, handy in RVVKIT_REQUIRE_SIGNATURE: an `ssh-ed25519 AAAA...`
    line or the key's 64 hex digits (`rvvkit inspect` prints them). Raw bytes pass through."""
    if isinstance(spec, bytes) and len(spec) == 32:
        return spec
    serialization, ed25519, _, unsupported = _crypto()
    text = os.fspath(spec)
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    if not os.path.isfile(text) and _HEX64.fullmatch(text.strip()):
        return bytes.fromhex(text.strip())
    if not os.path.exists(text) and re.fullmatch(r"[0-9a-fA-F]{16}", text.strip()):
        raise SignatureError(f"{text} is a key id, which names no key: give the public key "
                             "(a file, or its 64 hex digits)")
    inline = (not os.path.isfile(text) and " " in text.strip()
              and text.lstrip().startswith(("ssh-", "ecdsa-")))
    name = "the public key given inline" if inline else text
    data = text.encode("utf-8") if inline else _read(text, "public key")
    lines = [ln for ln in data.strip().splitlines() if ln.strip() and not ln.startswith(b"#")]
    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            if b"PRIVATE KEY" in data.split(b"\n", 1)[0]:
                raise SignatureError(f"{name} is a private key: name the public key (the .pub "
                                     "file, or `openssl pkey -in KEY -pubout`)")
            key = serialization.load_pem_public_key(data)
        elif len(lines) == 1:
            key = serialization.load_ssh_public_key(lines[0])
        else:
            raise SignatureError(f"{name}: expected one public key, found {len(lines)} lines")
    except (ValueError, unsupported) as exc:
        raise SignatureError(f"{name}: not a public key ({exc}); {_HOW}") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise SignatureError(f"{name}: {_kind(key)} key: rvvkit signatures are ed25519; {_HOW}")
    return _raw(key)


def sign_artifact(art: Artifact, private_key) -> str:
    """Signs `art` in memory (a path to the key, or an Ed25519PrivateKey); save() then writes
    the signed file. Replaces any earlier signature. Returns the key id."""
    if isinstance(private_key, (str, os.PathLike)):
        private_key = load_private_key(private_key)
    raw = _raw(private_key.public_key())
    # The check as save() will write it: with .rvvkit.sig present, whose name is in .shstrtab.
    sig = private_key.sign(DOMAIN + art.check_section(signed=True))
    art.signature = json.dumps({"alg": ALG, "key_id": key_id(raw), "public_key": raw.hex(),
                                "signature": sig.hex()},
                               sort_keys=True, separators=(",", ":")).encode("ascii")
    return key_id(raw)


def _parse(raw: bytes, source: str) -> Dict:
    bad = f"{source}: section {SIG} is malformed"
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise SignatureError(f"{bad}: invalid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise SignatureError(f"{bad}: not a JSON object")
    if doc.get("alg") != ALG:
        raise SignatureError(f"{bad}: algorithm {doc.get('alg')!r} (this rvvkit checks {ALG!r})")
    try:
        pub, sig = bytes.fromhex(doc["public_key"]), bytes.fromhex(doc["signature"])
    except (KeyError, TypeError, ValueError):
        raise SignatureError(f"{bad}: public_key and signature must be hex strings") from None
    if len(pub) != 32 or len(sig) != 64:
        raise SignatureError(f"{bad}: an ed25519 key is 32 bytes and a signature 64")
    if doc.get("key_id") != key_id(pub):
        raise SignatureError(f"{bad}: key_id {doc.get('key_id')!r} is not that of its key")
    return {"alg": ALG, "key_id": key_id(pub), "public_key": pub, "signature": sig}


def _verifies(art: Artifact, doc: Dict) -> bool:
    _, ed25519, invalid, _ = _crypto()
    # What was read from the file, when it was read; else what save() would write.
    check = art.check_read if art.check_read is not None else art.check_section()
    try:
        ed25519.Ed25519PublicKey.from_public_bytes(doc["public_key"]).verify(
            doc["signature"], DOMAIN + check)
    except invalid:
        return False
    return True


def describe(art: Artifact, source: str = "artifact") -> Optional[Dict]:
    """For `rvvkit inspect`: None if unsigned, else {alg, key_id, public_key (hex), verifies,
    problem}. `verifies` is against the key the section itself names (structure and integrity),
    which says nothing about trust: that is verify_artifact's job."""
    if art.signature is None:
        return None
    try:
        doc = _parse(art.signature, source)
    except SignatureError as exc:
        return {"alg": None, "key_id": None, "public_key": None, "verifies": False,
                "problem": str(exc)}
    info = {"alg": doc["alg"], "key_id": doc["key_id"], "public_key": doc["public_key"].hex()}
    try:
        ok = _verifies(art, doc)
    except SignatureError as exc:  # no cryptography: the key id is known, the rest is not
        return dict(info, verifies=None, problem=str(exc))
    return dict(info, verifies=ok, problem=None if ok else "signature does not verify")


def verify_artifact(art: Artifact, trusted, source: str = "artifact") -> str:
    """Returns the key id if `art` is signed by `trusted` (anything load_public_key takes) and
    the signature verifies; else SignatureError, one line: unsigned, another key, or bad."""
    want = load_public_key(trusted)
    if art.signature is None:
        raise SignatureError(f"{source} is not signed; a signature by key {key_id(want)} is "
                             "required (sign it with `rvvkit sign ARTIFACT --key KEY`)")
    doc = _parse(art.signature, source)
    if doc["public_key"] != want:
        raise SignatureError(f"{source} is signed by key {doc['key_id']}, not by the required "
                             f"key {key_id(want)}")
    if not _verifies(art, doc):
        raise SignatureError(f"{source}: the signature by key {doc['key_id']} does not verify: "
                             "the artifact was changed after it was signed")
    return doc["key_id"]


def required_key(given: Optional[str] = None) -> Optional[str]:
    """The public key a command must see a signature by: the option, else the environment."""
    return given or os.environ.get(REQUIRE_ENV) or None


__all__ = ["DOMAIN", "PASSPHRASE_ENV", "REQUIRE_ENV", "describe", "key_id", "load_private_key",
           "load_public_key", "required_key", "sign_artifact", "verify_artifact"]
