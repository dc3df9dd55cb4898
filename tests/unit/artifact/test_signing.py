"""Artifact signatures (rvvkit.artifact.signing): keys from ssh-keygen and openssl, what is signed,
and every way a signature is refused. Artifacts are built in memory: no compiler needed."""
import hashlib
import json
import shutil
import subprocess

import numpy as np
import pytest

from rvvkit.artifact.container import CHECK, SIG, Artifact
from rvvkit.errors import ArtifactError, SignatureError
from rvvkit.artifact.signing import (DOMAIN, describe, key_id, load_private_key, load_public_key,
                            sign_artifact, verify_artifact)

pytest.importorskip("cryptography")

META = {"inputs": [{"name": "x", "shape": [1, 3], "dtype": "float32"}], "plan": ["k"]}
SO = b"\x7fELF fake shared object \x00\x01\x02"
# sha256 of make().to_bytes() as written before signing existed: unsigned files must not change.
UNSIGNED_SHA256 = "a2aab74f348a02106daa66fbacd4ba6bce1fb18b928f952a9eb96c5bb8606d1c"


def make() -> Artifact:
    return Artifact(meta=META, weights=np.arange(37, dtype=np.float32),
                    c_source="/* odd length so that the weights need padding */\n"
                             "void k(float *x) { x[0] = 1; }\n",
                    cu_source="__global__ void k(float *x) { x[0] = 1; }\n",
                    extra={".rvvkit.so.riscv64-linux-gnu": SO})


def _tool(name):
    if shutil.which(name) is None:
        pytest.skip(f"{name} not installed")


def ssh_key(directory, name, kind="ed25519", passphrase="", bits=None):
    _tool("ssh-keygen")
    path = directory / name
    cmd = ["ssh-keygen", "-q", "-t", kind, "-N", passphrase, "-C", "test", "-f", str(path)]
    subprocess.run(cmd + (["-b", str(bits)] if bits else []), check=True)
    return path, path.with_name(name + ".pub")


def pem_key(directory, name):
    _tool("openssl")
    priv, pub = directory / f"{name}.pem", directory / f"{name}.pub.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(priv)], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(priv), "-pubout", "-out", str(pub)], check=True)
    return priv, pub


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    return {"ssh": ssh_key(d, "ed"), "other": ssh_key(d, "other"), "pem": pem_key(d, "p"),
            "dir": d}


def signed_file(tmp_path, key) -> Artifact:
    art = make()
    sign_artifact(art, key)
    art.save(tmp_path / "s.rvv")
    return Artifact.load(tmp_path / "s.rvv")


@pytest.mark.parametrize("kind", ["ssh", "pem"])
def test_round_trip(keys, kind, tmp_path):
    priv, pub = keys[kind]
    loaded = signed_file(tmp_path, priv)
    kid = verify_artifact(loaded, pub, "s.rvv")
    assert kid == key_id(load_public_key(pub)) and len(kid) == 16
    doc = json.loads(loaded.signature)
    assert doc["alg"] == "ed25519" and doc["key_id"] == kid
    # The signature is over the exact .rvvkit.check bytes of the file, behind the prefix.
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    Ed25519PublicKey.from_public_bytes(bytes.fromhex(doc["public_key"])).verify(
        bytes.fromhex(doc["signature"]), DOMAIN + loaded.check_read)
    assert describe(loaded)["verifies"] is True
    # Resaved unchanged, it still verifies (the signature round-trips through Artifact).
    loaded.save(tmp_path / "again.rvv")
    verify_artifact(Artifact.load(tmp_path / "again.rvv"), pub)


def test_in_memory_artifact_verifies_before_saving(keys):
    art = make()
    kid = sign_artifact(art, load_private_key(keys["pem"][0]))
    assert verify_artifact(art, keys["pem"][1]) == kid


def test_public_key_forms(keys):
    raw = load_public_key(keys["ssh"][1])
    line = keys["ssh"][1].read_text()
    assert load_public_key(line.strip()) == raw  # inline, as in RVVKIT_REQUIRE_SIGNATURE
    assert load_public_key(raw.hex()) == raw == load_public_key(raw)
    with pytest.raises(SignatureError, match="key id, which names no key"):
        load_public_key(key_id(raw))


def test_unsigned_bytes_unchanged(keys):
    assert hashlib.sha256(make().to_bytes()).hexdigest() == UNSIGNED_SHA256
    art = make()
    sign_artifact(art, keys["ssh"][0])
    assert art.to_bytes() != make().to_bytes()
    art.signature = None  # dropping the signature gives back the unsigned file exactly
    assert hashlib.sha256(art.to_bytes()).hexdigest() == UNSIGNED_SHA256
    assert Artifact.from_bytes(make().to_bytes()).signature is None


def test_sig_section_is_outside_the_chain(keys):
    art = make()
    sign_artifact(art, keys["ssh"][0])
    loaded = Artifact.from_bytes(art.to_bytes())
    assert SIG not in loaded.meta["sections"] and SIG not in loaded.extra
    assert [s["name"] for s in loaded.sections()][-3:] == [CHECK, SIG, ".shstrtab"]
    with pytest.raises(ArtifactError, match="invalid extra section name"):
        Artifact(META, "", b"", extra={SIG: b"x"}).to_bytes()


def test_tampered_meta_with_recomputed_checksums_refused(keys, tmp_path):
    loaded = signed_file(tmp_path, keys["ssh"][0])
    # An attacker edits the meta (or the C) and saves: every checksum is recomputed and the
    # integrity chain holds, but the signature carried along no longer matches.
    loaded.meta["model"] = "evil"
    loaded.c_source += "\nvoid evil(void) {}\n"
    loaded.save(tmp_path / "t.rvv")
    tampered = Artifact.load(tmp_path / "t.rvv")  # loads: the chain is consistent
    with pytest.raises(SignatureError, match="does not verify") as exc:
        verify_artifact(tampered, keys["ssh"][1], "t.rvv")
    assert "\n" not in str(exc.value)
    assert describe(tampered)["verifies"] is False


def test_signature_moved_to_another_artifact_refused(keys, tmp_path):
    donor = signed_file(tmp_path, keys["ssh"][0])
    other = make()
    other.c_source = "void k(float *x) { x[0] = 2; }\n"
    other.signature = donor.signature
    with pytest.raises(SignatureError, match="does not verify"):
        verify_artifact(Artifact.from_bytes(other.to_bytes()), keys["ssh"][1])


def test_other_key_refused(keys, tmp_path):
    loaded = signed_file(tmp_path, keys["other"][0])
    with pytest.raises(SignatureError, match="signed by key .* not by the required key"):
        verify_artifact(loaded, keys["ssh"][1], "s.rvv")


def test_unsigned_refused(keys):
    with pytest.raises(SignatureError, match="is not signed"):
        verify_artifact(Artifact.from_bytes(make().to_bytes()), keys["pem"][1], "m.rvv")


@pytest.mark.parametrize("payload, why", [
    (b"not json", "invalid JSON"), (b"[]", "not a JSON object"),
    (b'{"alg": "rsa"}', "algorithm 'rsa'"), (b'{"alg": "ed25519", "public_key": 3}', "hex"),
    (b'{"alg": "ed25519", "public_key": "00", "signature": "00"}', "32 bytes"),
])
def test_malformed_signature_section(keys, payload, why):
    art = make()
    art.signature = payload
    loaded = Artifact.from_bytes(art.to_bytes())
    with pytest.raises(SignatureError, match=why):
        verify_artifact(loaded, keys["ssh"][1])
    assert describe(loaded)["verifies"] is False


@pytest.mark.parametrize("kind, bits, name", [("rsa", 2048, "RSA"), ("ecdsa", None, "ECDSA")])
def test_other_key_types_refused(keys, kind, bits, name):
    priv, pub = ssh_key(keys["dir"], kind, kind=kind, bits=bits)
    with pytest.raises(SignatureError, match=f"{name}.* key: rvvkit signs with ed25519 keys only"):
        load_private_key(priv)
    with pytest.raises(SignatureError, match=f"{name}.* key: rvvkit signatures are ed25519"):
        load_public_key(pub)


def test_public_and_private_keys_swapped(keys):
    with pytest.raises(SignatureError, match="is a public key"):
        load_private_key(keys["ssh"][1])
    with pytest.raises(SignatureError, match="is a private key"):
        load_public_key(keys["pem"][0])
    with pytest.raises(SignatureError, match="cannot read signing key"):
        load_private_key(keys["dir"] / "missing")


def test_encrypted_key_needs_the_passphrase_from_the_environment(keys, monkeypatch, tmp_path):
    priv, pub = ssh_key(keys["dir"], "enc", passphrase="correct horse")
    monkeypatch.delenv("RVVKIT_SIGN_PASSPHRASE", raising=False)
    with pytest.raises(SignatureError, match="encrypted: set RVVKIT_SIGN_PASSPHRASE"):
        load_private_key(priv)
    monkeypatch.setenv("RVVKIT_SIGN_PASSPHRASE", "wrong")
    with pytest.raises(SignatureError, match="wrong passphrase"):
        load_private_key(priv)
    monkeypatch.setenv("RVVKIT_SIGN_PASSPHRASE", "correct horse")
    verify_artifact(signed_file(tmp_path, priv), pub)
    # A passphrase in the environment does not get in the way of an unencrypted key.
    load_private_key(keys["ssh"][0])


def test_missing_cryptography_is_one_clear_error(monkeypatch, keys):
    import builtins
    real = builtins.__import__

    def no_crypto(name, *args, **kwargs):
        if name.startswith("cryptography"):
            raise ImportError("No module named 'cryptography'")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_crypto)
    with pytest.raises(SignatureError, match=r"pip install 'rvvkit\[sign\]'"):
        load_private_key(keys["ssh"][0])
