"""Signing from the command line: `build --sign`, `rvvkit sign`, `--require-signature` (and
RVVKIT_REQUIRE_SIGNATURE) on run, bench and compare, and what `inspect` shows. A refusal is one
line on stderr, exit 1, and happens before anything is compiled."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

from conftest import make_model, rand

pytest.importorskip("cryptography")

RVVKIT = [sys.executable, "-m", "rvvkit"]
ENV = "RVVKIT_REQUIRE_SIGNATURE"


def cli(*args, env=None):
    full = {k: v for k, v in os.environ.items()
            if k not in (ENV, "RVVKIT_SIGN_PASSPHRASE")}
    return subprocess.run(RVVKIT + [str(a) for a in args], env=dict(full, **(env or {})),
                          capture_output=True, text=True, timeout=300)


def refused(proc, why):
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rvvkit: error: "), proc.stderr
    assert why in lines[0], lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def keygen(d, name, *extra):
    path = d / name
    subprocess.run(["ssh-keygen", "-q", "-N", "", "-C", "t", "-f", str(path)] + list(extra),
                   check=True)
    return path, path.with_name(name + ".pub")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    if subprocess.run(["which", "ssh-keygen", "openssl"], capture_output=True).returncode:
        pytest.skip("ssh-keygen or openssl not installed")
    d = tmp_path_factory.mktemp("signing")
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
                        helper.make_node("Relu", ["y"], ["z"], name="relu")],
                       [("x", (2, 4))], ["z"], {"w": rand(4, 3, seed=1)}, name="signed")
    (d / "m.onnx").write_bytes(model.SerializeToString())
    keys = {"ed": keygen(d, "ed", "-t", "ed25519"), "other": keygen(d, "other", "-t", "ed25519"),
            "rsa": keygen(d, "rsa", "-t", "rsa", "-b", "2048")}
    pem, pub = d / "p.pem", d / "p.pub.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(pem)], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(pem), "-pubout", "-out", str(pub)], check=True)
    keys["pem"] = (pem, pub)
    for name, *opts in (("plain", ), ("signed", "--sign", keys["ed"][0])):
        proc = cli("build", d / "m.onnx", "-o", d / f"{name}.rvv", *opts)
        assert proc.returncode == 0, proc.stderr
    np.savez(d / "in.npz", x=rand(2, 4, seed=7))
    return d, keys


def run_out(d, art, *opts, env=None):
    out = d / f"out-{art}-{len(opts)}.npz"
    proc = cli("run", d / art, "--inputs", d / "in.npz", "--output", out, *opts, env=env)
    assert proc.returncode == 0, proc.stderr
    return dict(np.load(out))


def test_build_sign_then_require(work):
    d, keys = work
    assert "signed with ed25519 key" in cli("build", d / "m.onnx", "-o", d / "b.rvv", "--sign",
                                            keys["ed"][0]).stderr
    got = run_out(d, "signed.rvv", "--require-signature", keys["ed"][1])
    want = run_out(d, "plain.rvv")
    np.testing.assert_array_equal(got["z"], want["z"])
    # Without the option a signed artifact runs like any other.
    np.testing.assert_array_equal(run_out(d, "signed.rvv")["z"], want["z"])


def test_sign_subcommand_with_openssl_key(work):
    d, keys = work
    proc = cli("sign", d / "plain.rvv", "--key", keys["pem"][0], "-o", d / "pem.rvv")
    assert proc.returncode == 0 and "signed" in proc.stderr, proc.stderr
    run_out(d, "pem.rvv", env={ENV: str(keys["pem"][1])})
    refused(cli("run", d / "pem.rvv", "--require-signature", keys["ed"][1]), "not by the required")


def test_refusals_happen_before_compiling(work, tmp_path):
    d, keys = work
    cache = tmp_path / "cache"
    env = {"RVVKIT_CACHE_DIR": str(cache)}
    refused(cli("run", d / "plain.rvv", "--require-signature", keys["ed"][1], env=env),
            "is not signed")
    refused(cli("run", d / "signed.rvv", "--require-signature", keys["other"][1], env=env),
            "not by the required key")
    refused(cli("run", d / "plain.rvv", env=dict(env, **{ENV: str(keys["ed"][1])})),
            "is not signed")
    refused(cli("bench", d / "plain.rvv", "--require-signature", keys["ed"][1], env=env),
            "is not signed")
    refused(cli("compare", d / "plain.rvv", "--require-signature", keys["ed"][1], env=env),
            "is not signed")
    assert not cache.exists() or not any(cache.iterdir())


def test_tampered_artifact_refused(work):
    from rvvkit.artifact import Artifact
    d, keys = work
    art = Artifact.load(d / "signed.rvv")
    art.meta["model"] = "evil"  # saved with every checksum recomputed, signature carried along
    art.save(d / "tampered.rvv")
    assert cli("inspect", d / "tampered.rvv").returncode == 0  # the chain itself holds
    refused(cli("run", d / "tampered.rvv", "--require-signature", keys["ed"][1]),
            "does not verify")


def test_compare_signed_artifact_and_models(work):
    d, keys = work
    proc = cli("compare", d / "signed.rvv", "--model", d / "m.onnx", "--repeat", "1",
               "--warmup", "0", "--require-signature", keys["ed"][1])
    assert proc.returncode == 0, proc.stderr
    # A model carries no C: the environment's requirement does not apply to it, the option is
    # a usage error.
    proc = cli("compare", d / "m.onnx", "--repeat", "1", "--warmup", "0",
               env={ENV: str(keys["ed"][1])})
    assert proc.returncode == 0, proc.stderr
    proc = cli("compare", d / "m.onnx", "--require-signature", keys["ed"][1])
    assert proc.returncode == 2 and "applies to an artifact" in proc.stderr


def test_inspect_shows_the_signature(work):
    d, keys = work
    proc = cli("inspect", d / "signed.rvv")
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("signature:"))
    assert "ed25519, key id" in line and line.endswith("valid")
    assert ".rvvkit.sig" in proc.stdout
    doc = json.loads(cli("inspect", d / "signed.rvv", "--json").stdout)
    assert doc["signature"]["verifies"] is True and doc["signature"]["alg"] == "ed25519"
    assert json.loads(cli("inspect", d / "plain.rvv", "--json").stdout)["signature"] is None
    assert "signature: none" in cli("inspect", d / "plain.rvv").stdout


def test_key_errors_are_one_line(work, tmp_path):
    d, keys = work
    refused(cli("sign", d / "plain.rvv", "--key", keys["rsa"][0], "-o", tmp_path / "x.rvv"),
            "RSA key: rvvkit signs with ed25519 keys only")
    refused(cli("run", d / "signed.rvv", "--require-signature", keys["rsa"][1]),
            "RSA key: rvvkit signatures are ed25519")
    enc = tmp_path / "enc"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "pw", "-f", str(enc)], check=True)
    refused(cli("build", d / "m.onnx", "-o", tmp_path / "e.rvv", "--sign", enc),
            "encrypted: set RVVKIT_SIGN_PASSPHRASE")
    assert not (tmp_path / "e.rvv").exists()  # the key is opened before building
    proc = cli("sign", d / "plain.rvv", "--key", enc, "-o", tmp_path / "e.rvv",
               env={"RVVKIT_SIGN_PASSPHRASE": "pw"})
    assert proc.returncode == 0, proc.stderr


def test_sign_in_place_and_python_api(work, tmp_path):
    import shutil

    import rvvkit
    d, keys = work
    shutil.copy(d / "plain.rvv", tmp_path / "m.rvv")
    proc = cli("sign", tmp_path / "m.rvv", "--key", keys["other"][0])
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.rvv"]  # no temporary file left
    with rvvkit.load(tmp_path / "m.rvv", require_signature=keys["other"][1]) as sess:
        assert sess.run({"x": rand(2, 4, seed=7)})["z"].shape == (2, 3)
    with pytest.raises(rvvkit.SignatureError, match="not by the required key"):
        rvvkit.load(tmp_path / "m.rvv", require_signature=keys["ed"][1])


@pytest.mark.qemu
def test_signed_artifact_runs_under_qemu(work):
    """The C runner reads the file itself and must accept (and skip) .rvvkit.sig."""
    from executors import _why_not
    if _why_not("qemu"):
        pytest.skip(_why_not("qemu"))
    d, keys = work
    proc = cli("run", d / "signed.rvv", "--inputs", d / "in.npz", "--on", "qemu")
    assert proc.returncode == 0, proc.stderr
    proc = cli("run", d / "signed.rvv", "--inputs", d / "in.npz", "--on", "qemu",
               "--require-signature", keys["ed"][1])
    assert proc.returncode == 0 and "verified" in proc.stderr, proc.stderr
