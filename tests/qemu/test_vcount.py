"""The VL-counting plugin (toolchain/qemu_plugin/qemu_vcount.c) under the counting QEMU 10
(scripts/qemu_plugins.sh): hand-written sequences with known vl counted by class and by
elements at VLEN 128 and 512; a strip-mined loop whose every instruction counts n elements;
QEMU 7.2's and 10's counts of one artifact agree; without QEMU 10, one clear error."""
import os
import subprocess

import pytest

import rvvkit
from qemu_support import CLANG, QEMU, small_feeds, small_model
from rvvkit.errors import RvvkitError
from rvvkit.jit import targets
from rvvkit.runtime.counting import icount, vcount

RV = targets.riscv()
QEMU10 = vcount.counting_qemu()


def _need_qemu10():
    if not (QEMU and CLANG):
        pytest.skip("qemu-riscv64 or clang-16 + lld-16 missing: run scripts/setup.sh")
    if QEMU10 is None:
        msg = f"no counting QEMU 10 at {vcount.counting_dir()}: run scripts/qemu_plugins.sh"
        if os.environ.get("CI") == "true":   # setup.sh builds it: CI must have it
            pytest.fail(msg)
        pytest.skip(msg)


# One pass: (asm, class, key, elements at VLEN 128, at VLEN 512). AVL 5/17/100 at
# e32m1/e16m4/e8m8: VLMAX 4/32/128 at VLEN 128, 16/128/512 at 512.
PASS = [
    ("li t0, 5", None, None, 0, 0),
    ("vsetvli t1, t0, e32, m1, ta, ma", "vset", "m1.e32", 0, 0),
    ("vle32.v v1, (%0)", "vload.unit", "m1.e32", 4, 5),
    ("vfmacc.vv v2, v1, v1", "vfma", "m1.e32", 4, 5),
    ("vfredusum.vs v3, v2, v3", "vred", "m1.e32", 4, 5),
    ("vfmv.f.s ft0, v3", "vmove.scalar", "m1.e32", 1, 1),
    ("li t0, 17", None, None, 0, 0),
    ("vsetvli t1, t0, e16, m4, ta, ma", "vset", "m4.e16", 0, 0),
    ("vadd.vv v4, v8, v12", "valu", "m4.e16", 17, 17),
    ("vwmacc.vv v16, v4, v8", "vwfma", "m4.e16", 17, 17),
    ("vse16.v v4, (%0)", "vstore.unit", "m4.e16", 17, 17),
    ("vmv2r.v v2, v4", "vmove.whole", "m4.e16", 16, 64),      # 2 x VLENB / 2 bytes
    ("vl2re32.v v2, (%0)", "vmem.whole", "m4.e32", 8, 32),    # 2 x VLENB / 4 bytes
    ("li t0, 100", None, None, 0, 0),
    ("vsetvli t1, t0, e8, m8, ta, mu", "vset", "m8.e8", 0, 0),
    ("vadd.vv v8, v16, v24, v0.t", "valu", "m8.e8", 100, 100),  # masked: vl all the same
    ("vmand.mm v0, v1, v2", "vmask", "m8.e8", 100, 100),
    ("vlm.v v0, (%0)", "vmem.mask", "m8.e8", 13, 13),          # ceil(100 / 8) bytes
    ("vle8ff.v v8, (%0)", "vload.unit", "m8.e8", 100, 100),    # the vl it leaves (no fault)
    ("vsetvli t1, t0, e8, m1, ta, ma", "vset", "m1.e8", 0, 0), # reads that vl: 100 kept
]
_ASM = "\n".join(f'            "{a}\\n\\t"' for a, *_ in PASS)
_CLOBBER = ", ".join(f'"v{i}"' for i in range(32))
PROGRAM = r"""
#include <stdlib.h>
static int buf[4096] __attribute__((aligned(64)));
static float x[1000], y[1000];
int main(int argc, char **argv) {
    long n = atol(argv[1]), len = atol(argv[2]);
    for (long i = 0; i < n; i++)
        __asm__ volatile(
%s
            : : "r"(buf) : "t0", "t1", "ft0", %s, "memory");
    /* strip-mined y += 2 x over len elements: load, load, fma, store each count len */
    for (long i = 0; i < n; i++) {
        float *px = x, *py = y;
        for (long left = len; left > 0;) {
            long vl;
            __asm__ volatile(
                "vsetvli %%0, %%1, e32, m2, ta, ma\n\t"
                "vle32.v v2, (%%2)\n\t"
                "vle32.v v4, (%%3)\n\t"
                "vfmacc.vf v4, %%4, v2\n\t"
                "vse32.v v4, (%%3)\n\t"
                : "=&r"(vl) : "r"(left), "r"(px), "r"(py), "f"(2.0f) : "v2", "v3", "v4",
                  "v5", "memory");
            left -= vl, px += vl, py += vl;
        }
    }
    return 0;
}
""" % (_ASM, _CLOBBER)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    _need_qemu10()
    d = tmp_path_factory.mktemp("vcount")
    (d / "p.c").write_text(PROGRAM)
    clang = RV.family_flags("clang")
    subprocess.run([CLANG, f"--target={RV.triple}", *clang.arch, *clang.cross_link, "-O2",
                    str(d / "p.c"), "-o", str(d / "p")], check=True, capture_output=True)
    return d / "p"


def _run(program, vlen: int, passes: int, length: int, out) -> dict:
    qemu = [QEMU10, "-L", RV.sysroot, "-cpu", RV.cpu_string(vlen)]
    # fixed-width numbers (atol reads the leading zeros as decimal): runs compared against
    # each other then copy argv strings of one length at start-up, whose scalar loads and
    # stores otherwise differ by a few (seen: 8 fewer in the longer run, under load)
    subprocess.run([*qemu, *vcount.qemu_vcount_args(out), str(program), f"{passes:06d}",
                    f"{length:06d}"], check=True, timeout=120)
    return vcount.read_vcounts(out)


@pytest.mark.parametrize("vlen", [128, 512])
def test_hand_written_sequence_by_class_and_elements(program, tmp_path, vlen):
    """Ten more passes add exactly ten times each line's class and its elements (vl, or the
    whole registers' elements, or vlm's bytes; a setter none); the strip-mined loop is off."""
    per = vcount.difference(_run(program, vlen, 13, 0, tmp_path / "hi.json"),
                            _run(program, vlen, 3, 0, tmp_path / "lo.json"))
    want_n, want_el = {}, {}
    for _, cls, key, e128, e512 in PASS:
        if cls:
            want_n.setdefault(cls, {}).setdefault(key, 0)
            want_n[cls][key] += 10
            if e128:
                want_el.setdefault(cls, {}).setdefault(key, 0)
                want_el[cls][key] += 10 * (e128 if vlen == 128 else e512)
    assert {c: k for c, k in per["classes"].items() if c.startswith("v")} == want_n
    assert per["vl_weighted"] == want_el
    assert per["vl_weighted_vector_ops"] == sum(sum(k.values()) for k in want_el.values())
    assert per["vsetvl"] == 40 and per["vector_insns_unknown_lmul"] == 0
    # LMUL-weighted: setters 1, vlm 1, whole-register ones their count, the rest vtype's LMUL
    assert per["lmul_weighted_vector_ops"] == 10 * (4 + 4 * 1 + 3 * 4 + 2 + 2 + 3 * 8 + 1)


@pytest.mark.parametrize("vlen,length", [(128, 1000), (512, 1000), (512, 37)])
def test_strip_mined_loop_counts_n_elements_per_instruction(program, tmp_path, vlen, length):
    """y += 2x over `length` elements at e32m2: whatever VLEN cuts it into, the two loads, the
    FMA and the store each process exactly `length` elements per pass; the setters none."""
    per = vcount.difference(_run(program, vlen, 3, length, tmp_path / "hi.json"),
                            _run(program, vlen, 3, 0, tmp_path / "lo.json"))
    strips = -(-length // (vlen * 2 // 32))
    assert per["vl_weighted"]["vload.unit"] == {"m2.e32": 3 * 2 * length}
    assert per["vl_weighted"]["vfma"] == {"m2.e32": 3 * length}
    assert per["vl_weighted"]["vstore.unit"] == {"m2.e32": 3 * length}
    assert per["vl_weighted_vector_ops"] == 3 * 4 * length
    assert per["classes"]["vset"] == {"m2.e32": 3 * strips}
    assert per["lmul_weighted_vector_ops"] == 3 * strips * (1 + 4 * 2)


def test_counts_agree_with_qemu_7_2s_plugin(program, tmp_path):
    """The program's work (7 passes minus 2) counted by QEMU 7.2's counting plugin and by
    QEMU 10's: equal instructions, vector instructions, setters and LMUL-weighted ops, per
    thread too. (Whole-process counts differ by a few thousand: the dynamic loader and libc
    start-up take other paths under the two QEMUs.)"""
    qemu7 = [QEMU, "-L", RV.sysroot, "-cpu", RV.cpu_string(256)]
    c7 = icount.per_run(*(icount.count_instructions(qemu7, [str(program), n, "300"],
                                                    timeout=120) for n in ("7", "2")), 1)
    c10 = vcount.difference(*(_run(program, 256, n, 300, tmp_path / f"v{n}.json")
                              for n in (7, 2)))
    for k in icount.COUNT_KEYS:
        assert c10[k] == c7[k], k
        assert [t[k] for t in c10["per_thread"]] == [t[k] for t in c7["per_thread"]], k


@pytest.mark.parametrize("threads", [1, 2])
def test_one_inference_agrees_between_qemu_7_2_and_10(threads):
    """One inference of a small model's artifact through the session: QEMU 10's vector,
    setter and LMUL-weighted counts equal QEMU 7.2's per thread, and so do all instructions on
    one thread (on two, the scalar instructions of waiting and waking differ with timing);
    the classes add up to them; the VL-weighted figure is there, per thread and per class."""
    _need_qemu10()
    art = rvvkit.build(small_model(), cuda=False)
    with rvvkit.load(art, on="qemu", vlen=256, threads=threads, compiler=CLANG) as sess:
        c7 = sess.instruction_counts(small_feeds())
        c10 = sess.instruction_counts(small_feeds(), vl=True)
        classes = sess.instruction_classes(small_feeds())
    keys = icount.COUNT_KEYS if threads == 1 else icount.COUNT_KEYS[1:]
    for k in keys:
        assert [t[k] for t in c10["per_thread"]] == [t[k] for t in c7["per_thread"]], k
        assert c10[k] == c7[k] == classes[k], k
    assert len(c7["per_thread"]) == threads
    assert classes["counted_by"] == f"qemu {vcount.VERSION}"
    vl_total = classes["vl_weighted_vector_ops"]
    assert vl_total > classes["lmul_weighted_vector_ops"] > 0
    assert sum(t["vl_weighted_vector_ops"] for t in classes["per_thread"]) == vl_total
    assert sum(sum(k.values()) for k in classes["vl_weighted"].values()) == vl_total


def test_generation_counts_agree_between_qemu_7_2_and_10():
    """A decoder's `runner --generate` process (benchmarks/bench_llm.py's per-token counts):
    under QEMU 10 the vector, setter and LMUL-weighted counts equal QEMU 7.2's, and it adds
    the VL-weighted elements."""
    _need_qemu10()
    from rvvkit.zoo import llm as zoo_llm
    cfg = zoo_llm.DecoderConfig(vocab=64, hidden=64, heads=2, kv_heads=1, layers=1,
                                intermediate=32, qkv_bias=False)
    art = rvvkit.build(zoo_llm.decoder(cfg), max_seq=32, cuda=False)
    with rvvkit.load(art, on="qemu", vlen=256, threads=1, compiler=CLANG) as sess:
        c7 = sess.generation_counts([1, 2, 3], 2)
        c10 = sess.generation_counts([1, 2, 3], 2, vl=True)
    for k in icount.COUNT_KEYS[1:]:
        assert c10[k] == c7[k], k
    assert c10["vl_weighted_vector_ops"] > c10["lmul_weighted_vector_ops"] > 0


@pytest.mark.skipif(not (QEMU and CLANG), reason="qemu-riscv64 or clang-16 missing")
def test_without_qemu_10_lmul_counts_work_and_vl_fails_clearly(tmp_path, monkeypatch):
    """No counting QEMU 10 (an empty cache): the LMUL-weighted counts and the classes still
    come from QEMU 7.2; asking for VL-weighted ones is one error naming the set-up script."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert vcount.counting_qemu() is None
    art = rvvkit.build(small_model(), cuda=False)
    with rvvkit.load(art, on="qemu", vlen=128, threads=1, compiler=CLANG) as sess:
        counts = sess.instruction_counts(small_feeds())
        classes = sess.instruction_classes(small_feeds())
        with pytest.raises(RvvkitError, match="scripts/qemu_plugins.sh"):
            sess.instruction_counts(small_feeds(), vl=True)
        with pytest.raises(RvvkitError, match="scripts/qemu_plugins.sh"):
            sess.instruction_classes(small_feeds(), vl=True)
    assert counts["lmul_weighted_vector_ops"] > 0
    assert classes["counted_by"] == "qemu 7.2" and "vl_weighted_vector_ops" not in classes
