"""ISA profiles (toolchain/isa/) as one source for a build's -march and QEMU's -cpu: every board
preset names one; a profile's build runs under the checking QEMU (10.0, which traps any
extension its -cpu leaves out) with exactly the profile's extensions, so the plain-RVV build is
shown to use no Zvfh/Zfh/Zb*; the check itself is shown to bite (a Zvfh instruction dies under
the plain-RVV CPU); the counting QEMU 7.2 gets the properties it can name."""
import json
import os
import re
import signal
import subprocess

import numpy as np
import pytest

import rvvkit
from qemu_support import RV_COMPILER, needs_qemu, small_feeds, small_model
from rvvkit.errors import RvvkitError
from rvvkit.jit import compile_flags, compile_source, isa, resolve_compiler, targets
from rvvkit.runtime.qemu import cpu_string, resolve_sysroot

K1_EXTENSIONS = {"v", "zfh", "zvfh", "zba", "zbb", "zbs", "zicbom", "zicbop", "zicboz"}


def _checking_qemu() -> str:
    """The checking QEMU; scripts/setup.sh fetches it, so CI fails without it, and a machine
    set up otherwise skips with the reason."""
    try:
        return isa.check_qemu()
    except RvvkitError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))


# -- the data --------------------------------------------------------------------------------

def test_every_board_names_a_profile_and_k1_has_its_extensions():
    for board in targets.board_presets():
        isa.profile(targets.board_preset(board)["isa"])
    assert K1_EXTENSIONS <= set(isa.profile("k1").extensions)
    assert isa.profile().name == "rv64gcv" and isa.profile().extensions == ("v",)
    with pytest.raises(RvvkitError, match="no ISA profile 'k2'.*k1"):
        isa.profile("k2")


@pytest.mark.parametrize("name", isa.profile_names())
def test_every_flag_set_names_the_profile_and_nothing_else(name):
    """Each compiler family's flags spell every extension of the profile (clang-16 excepted
    where it cannot name one) and no extension the profile lacks."""
    prof = isa.profile(name)
    known = set(targets.riscv().get("isa", "qemu10"))
    implied = {"zfhmin": "zfh", "zvfhmin": "zvfh"}     # named by the larger extension
    want = set(prof.extensions) - {"v"}
    for family, flags in prof.flags.items():
        arch = next(f for f in flags if f.startswith(("-march=", "-mcpu=")))
        tokens = {re.sub(r"\d+p\d+$", "", t) for t in re.split(r"[_+]", arch.split("=")[1])}
        named = tokens & known
        assert named <= want, (family, named - want)
        if family != "clang16":
            missing = {e for e in want if e not in named and implied.get(e) not in named}
            assert not missing, (family, missing)


def test_plain_rvv_flags_are_the_targets_own():
    """The default profile changes nothing: the target's plain-RVV flags, so caches and
    counts of builds without a profile stay what they were."""
    rv = targets.riscv()
    for family in ("gcc", "clang", "zig"):
        assert isa.profile().arch_flags(family, "x version 16.0.6") == \
            rv.family_flags(family).arch


def test_clang_16_gets_its_experimental_spelling():
    k1 = isa.profile("k1")
    old = k1.arch_flags("clang", "Debian clang version 16.0.6 (15+b1)")
    new = k1.arch_flags("clang", "clang version 19.1.7")
    assert "-menable-experimental-extensions" in old and any("zvfh0p1" in f for f in old)
    assert "-menable-experimental-extensions" not in new and any("_zvfh_" in f for f in new)


def test_qemu_cpu_strings_per_profile():
    """QEMU 7.2 gets what it can name (it has no Zvfh property: it runs Zvfh code as is);
    QEMU 10 gets every extension it knows set on or off."""
    k1_count = cpu_string(256, isa="k1")
    assert k1_count.startswith(targets.riscv().cpu_string(256))
    assert ",Zfh=true" in k1_count and ",zba=true" in k1_count and "zvfh" not in k1_count
    assert cpu_string(256) == targets.riscv().cpu_string(256)
    plain = cpu_string(256, check=True)
    spelled = targets.riscv().get("isa", "qemu10")
    assert all(f",{p}=false" in plain for p in spelled.values())
    k1 = cpu_string(256, isa="k1", check=True)
    assert ",zvfh=true" in k1 and ",zfh=true" in k1 and ",zicond=false" in k1


# -- the check -------------------------------------------------------------------------------

PROBE = r"""
#include <stdio.h>
int main(int argc, char **argv) {
    long vl = 0;
    if (argc > 1 && argv[1][0] == 'h')   /* a vector add at SEW 16 on half floats: Zvfh */
        __asm__ volatile("vsetvli %0, %1, e16, m1, ta, ma\n\tvfadd.vv v1, v2, v3"
                         : "=r"(vl) : "r"(4L) : "v1");
    if (argc > 1 && argv[1][0] == 's')   /* a scalar half-float add: Zfh */
        __asm__ volatile("fmv.h.x ft0, zero\n\tfadd.h ft1, ft0, ft0" ::: "ft0", "ft1");
    printf("ran %ld\n", vl);
    return 0;
}
"""


@needs_qemu
@pytest.mark.parametrize("what", ["h", "s"])
def test_the_check_traps_an_extension_outside_the_profile(what):
    """A program built for the K1 runs under the checking QEMU with the K1's CPU, and dies
    with SIGILL under the plain-RVV CPU: the check is real, not a formality."""
    qemu = _checking_qemu()
    comp = resolve_compiler(RV_COMPILER, target="rvv")
    exe = compile_source(PROBE, comp, compile_flags(comp, shared=False, isa="k1"),
                         name="isa_probe", kind="exe", use_cache=False)
    for profile, ok in (("k1", True), ("rv64gcv", False)):
        proc = subprocess.run([qemu, "-L", resolve_sysroot(), "-cpu",
                               cpu_string(256, isa=profile, check=True), str(exe), what],
                              capture_output=True, text=True, timeout=60)
        if ok:
            assert proc.returncode == 0 and proc.stdout.startswith("ran"), proc.stderr
        else:
            assert proc.returncode == -signal.SIGILL, (profile, proc.returncode, proc.stderr)


@needs_qemu
@pytest.mark.parametrize("profile", isa.profile_names())
def test_each_profile_build_uses_only_its_extensions(profile):
    """A model's kernels and the runner, built for the profile, run under the checking QEMU
    with exactly the profile's extensions and match the host: the plain-RVV build uses no
    Zvfh, Zfh or Zb*, the K1 and RVA23 builds nothing beyond theirs."""
    qemu = _checking_qemu()
    model, feeds = small_model(), small_feeds()
    art = rvvkit.build(model, cuda=False)
    with rvvkit.load(art, on="host") as host:
        want = host.run(feeds)
    with rvvkit.load(art, on="qemu", vlen=256, isa=profile, check=True,
                     compiler=RV_COMPILER, qemu=qemu) as sess:
        assert sess.describe()["isa_checked"] and sess.describe()["isa"].startswith(profile)
        got = sess.run(feeds)
        with pytest.raises(RvvkitError, match="cannot count"):
            sess.instruction_counts(feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)


@needs_qemu
def test_board_option_builds_and_counts_for_the_board(tmp_path):
    """`rvvkit bench --on qemu --board k1` compiles with the K1's -march, runs QEMU 7.2 with
    its properties and the preset's VLEN, counts, and says which profile ran; `compare`
    checks the same build under QEMU 10 and names the profile in its row; a profile on a path
    that is not QEMU is a usage error."""
    _checking_qemu()
    model = small_model()
    path = tmp_path / "m.rvv"
    rvvkit.build(model, cuda=False).save(str(path))
    env = dict(os.environ, RVVKIT_COMPILER=RV_COMPILER)
    proc = subprocess.run(["rvvkit", "bench", str(path), "--on", "qemu", "--board", "k1",
                           "--repeat", "1", "--warmup", "0", "--json"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["isa"] == "k1" and row["vlen"] == 256 and not row["isa_checked"]
    assert row["dynamic_instructions"] > 0
    onnx_path = tmp_path / "m.onnx"
    onnx_path.write_bytes(model.SerializeToString())
    proc = subprocess.run(["rvvkit", "compare", str(onnx_path), "--on", "qemu", "--board", "k1",
                           "--check-isa", "--repeat", "1", "--warmup", "0", "--json"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (row,) = [r for r in json.loads(proc.stdout)["rows"] if r["executor"] == "qemu"]
    assert row["status"] == "ok" and row["isa"] == "k1" and row["isa_checked"], row
    assert row["path"] == "qemu vlen=256 k1 (checked)"
    bad = subprocess.run(["rvvkit", "run", str(path), "--on", "host", "--board", "k1"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "applies to --on qemu" in bad.stderr
