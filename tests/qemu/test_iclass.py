"""The class-counting plugin (toolchain/qemu_plugin/qemu_iclass.c): hand-written RVV sequences
counted by class x LMUL x SEW and by work, exactly; its totals agree with the counting
plugin's on generated code; one inference's classes through the QEMU session."""
import subprocess

import pytest

import rvvkit
from qemu_support import CLANG, QEMU, small_feeds, small_model
from rvvkit.jit import targets
from rvvkit.runtime.counting import icount
from rvvkit.runtime.counting.iclass import class_difference, qemu_class_args, read_classes

RV = targets.riscv()
needs = pytest.mark.skipif(not (QEMU and CLANG), reason="qemu-riscv64 or clang-16 + lld-16 "
                           "missing: run scripts/setup.sh")

# (asm, class, key of the vtype in force or of the memory width, work): one pass of the loop.
PASS = [
    ("vsetvli t0, zero, e32, m4, ta, ma", "vset", "m4.e32", 1),
    ("vle32.v v4, (%0)", "vload.unit", "m4.e32", 4),
    ("vfmacc.vv v8, v4, v4", "vfma", "m4.e32", 4),
    ("vfmv.f.s ft0, v8", "vmove.scalar", "m4.e32", 1),          # the group does not matter
    ("vle8.v v4, (%1)", "vload.unit", "m4.e8", 1),              # EMUL 8/32 x 4 = 1
    ("vfredusum.vs v12, v8, v12", "vred", "m4.e32", 4),
    ("vfwcvt.f.f.v v16, v4", "vwiden", "m4.e32", 8),            # the e64 m8 destination
    ("vsetvli t0, zero, e16, m2, ta, ma", "vset", "m2.e16", 1),
    ("vwmacc.vv v16, v2, v2", "vwfma", "m2.e16", 4),
    ("vfwmacc.vv v16, v2, v2", "vfwfma", "m2.e16", 4),          # float: a class of its own
    ("vmacc.vv v6, v2, v2", "vima", "m2.e16", 2),
    ("vnsrl.wi v2, v4, 8", "vnarrow", "m2.e16", 4),
    ("vmand.mm v0, v1, v2", "vmask", "m2.e16", 1),
    ("vcpop.m t1, v0", "vmask", "m2.e16", 1),
    ("vrgather.vv v4, v8, v10", "vperm", "m2.e16", 2),
    ("vslidedown.vi v4, v8, 1", "vperm", "m2.e16", 2),
    ("vadd.vv v4, v8, v10", "valu", "m2.e16", 2),
    ("vse16.v v2, (%0)", "vstore.unit", "m2.e16", 2),
    ("vlse16.v v2, (%0), t0", "vload.strided", "m2.e16", 2),
    ("vluxei16.v v2, (%0), v4", "vload.indexed", "m2.e16", 2),
    ("vmv.x.s t1, v2", "vmove.scalar", "m2.e16", 1),
    ("vl4re32.v v4, (%0)", "vmem.whole", "m2.e32", 4),         # its register count
    ("vmv2r.v v2, v4", "vmove.whole", "m2.e16", 2),
    ("vlm.v v0, (%1)", "vmem.mask", "m2.e8", 1),
]
_ASM = "\n".join(f'            "{a}\\n\\t"' for a, *_ in PASS)
PROGRAM = r"""
#include <stdlib.h>
static short buf[8192] __attribute__((aligned(64)));
static unsigned char b8[8192] __attribute__((aligned(64)));
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++)
        __asm__ volatile(
%s
            : : "r"(buf), "r"(b8) : "t0", "t1", "ft0", "v0", "v1", "v2", "v3", "v4", "v5",
              "v6", "v7", "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17",
              "v18", "v19", "v20", "v21", "v22", "v23", "memory");
    return 0;
}
""" % _ASM


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    d = tmp_path_factory.mktemp("iclass")
    (d / "p.c").write_text(PROGRAM)
    clang = RV.family_flags("clang")
    subprocess.run([CLANG, f"--target={RV.triple}", *clang.arch, *clang.cross_link, "-O2",
                    str(d / "p.c"), "-o", str(d / "p")], check=True, capture_output=True)
    return d / "p"


def _arg(passes: int) -> str:
    """The count zero-padded: "13" against "3" moved every string above argv by a byte, and
    the dynamic loader's and libc's string scans then took a few branches more or fewer
    (whether more or fewer depended on the environment's size); "013" and "003" do not."""
    return f"{passes:03d}"


def _run(program, passes: int, out) -> dict:
    qemu = [QEMU, "-L", RV.sysroot, "-cpu", RV.cpu_string(256)]
    subprocess.run([*qemu, *qemu_class_args(out), str(program), _arg(passes)], check=True,
                   timeout=120)
    return read_classes(out)


@needs
def test_hand_written_sequence_counted_by_class_and_work(program, tmp_path):
    """Ten more passes add exactly ten times each line's class, key and work; the loop's own
    scalar instructions (the compiler's choice) land in the scalar classes."""
    per = class_difference(_run(program, 13, tmp_path / "hi.json"),
                           _run(program, 3, tmp_path / "lo.json"))
    want = {}
    for _, cls, key, _ in PASS:
        want.setdefault(cls, {}).setdefault(key, 0)
        want[cls][key] += 10
    vector = {c: k for c, k in per["classes"].items() if c.startswith("v")}
    scalar = {c: k for c, k in per["classes"].items() if not c.startswith("v")}
    assert vector == want
    assert set(scalar) <= {"int", "fp", "mem", "branch", "other"} and scalar["branch"]
    assert all(list(k) == ["-"] for k in scalar.values())
    assert per["work_weighted_vector_ops"] == 10 * sum(w for *_, w in PASS)
    assert per["insns"] == 10 * len(PASS) + sum(k["-"] for k in scalar.values())


@needs
def test_totals_agree_with_the_counting_plugin(program, tmp_path):
    """The same run counted by both plugins: equal instructions, and the vector classes add up
    to the counting plugin's vector instructions."""
    qemu = [QEMU, "-L", RV.sysroot, "-cpu", RV.cpu_string(256)]
    counts = icount.count_instructions(qemu, [str(program), _arg(7)], timeout=120)
    classes = _run(program, 7, tmp_path / "c.json")
    assert classes["insns"] == counts["insns"]
    vector = sum(n for cls, keys in classes["classes"].items() if cls.startswith("v")
                 for n in keys.values())
    assert vector == counts["vector_insns"]


@needs
def test_one_inference_by_class_through_the_session():
    """QemuSession.instruction_classes: one inference's classes, their total the same as
    instruction_counts' (both subtract a run of none), the FMA and unit-stride loads present,
    and the work at least the number of vector instructions."""
    art = rvvkit.build(small_model(), cuda=False)
    with rvvkit.load(art, on="qemu", vlen=256, threads=1, compiler=CLANG) as sess:
        classes = sess.instruction_classes(small_feeds())
        counts = sess.instruction_counts(small_feeds())
    assert classes["insns"] == counts["insns"]
    assert {"vfma", "vload.unit", "vstore.unit", "vset"} <= set(classes["classes"])
    vector = sum(n for cls, keys in classes["classes"].items() if cls.startswith("v")
                 for n in keys.values())
    assert vector == counts["vector_insns"]
    assert classes["work_weighted_vector_ops"] >= vector
