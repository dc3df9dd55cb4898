"""The QEMU instruction-counting plugin: it loads in the installed qemu-riscv64, its counts are
exact (repeatable, linear in work done, vector instructions classified right), and the Python
helpers around it behave. Tiny riscv64 programs are built here with clang-16 and GCC 12.

Counts depend on everything the process sees (argv and environment strings are scanned by
ld.so and libc), so every comparison below runs the same binary with the same environment and
with arguments of the same length."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rvvkit.errors import ExecutionError
from rvvkit.jit import targets
from rvvkit.runtime.counting import icount

RV = targets.riscv()  # toolchain/targets/riscv64-linux-gnu.toml
SYSROOT = RV.sysroot
QEMU = shutil.which(os.environ.get("RVVKIT_QEMU") or RV.qemu_binary)
CLANG = shutil.which("clang-16")
GCC = shutil.which(f"{RV.triple}-gcc")
HOST_CC = any(shutil.which(c) for c in icount.HOST_COMPILERS)

_skip_no_qemu = pytest.mark.skipif(not (QEMU and HOST_CC),
                                   reason="qemu-riscv64 or a host C compiler missing "
                                          "(run scripts/setup.sh)")


def needs_qemu(test):
    return pytest.mark.qemu(_skip_no_qemu(test))


needs_clang = pytest.mark.skipif(not CLANG, reason="clang-16 not installed")
needs_gcc = pytest.mark.skipif(not GCC, reason="riscv64-linux-gnu-gcc not installed")


def cpu(vlen: int) -> str:
    return RV.cpu_string(vlen)


def qemu_prefix(vlen: int = 128):
    return [QEMU, "-L", SYSROOT, "-cpu", cpu(vlen)]


# The loop count comes from argv so one binary serves every N; `volatile` keeps the compiler
# from folding the loop. Nothing printed depends on N.
LOOP_C = r"""
#include <stdlib.h>
volatile long sink;
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) sink += i;
    return 0;
}
"""

# y += 2*x with RVV intrinsics, strip-mined by vsetvl (the shape of rvvkit's kernels).
AXPY_C = r"""
#include <riscv_vector.h>
#include <stdlib.h>
static float x[4096], y[4096];
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) { x[i] = (float)i; y[i] = 1.0f; }
    float *px = x, *py = y;
    for (long left = n; left > 0;) {
        size_t vl = __riscv_vsetvl_e32m8(left);
        vfloat32m8_t vx = __riscv_vle32_v_f32m8(px, vl);
        vfloat32m8_t vy = __riscv_vle32_v_f32m8(py, vl);
        vy = __riscv_vfmacc_vf_f32m8(vy, 2.0f, vx, vl);
        __riscv_vse32_v_f32m8(py, vy, vl);
        px += vl; py += vl; left -= vl;
    }
    for (long i = 0; i < n; i++)
        if (y[i] != 1.0f + 2.0f * (float)i) return 1;
    return 0;
}
"""

# One pass = 9 vector instructions, 3 of them vsetvl-family, next to scalar FP loads/stores
# (LOAD-FP/STORE-FP with widths 2/3 must NOT count) and a CSR read. Vector loads of every
# element width (width fields 0, 5, 6, 7) are included: they are what the encoding rule covers.
ENCODINGS_C = r"""
#include <stdlib.h>
static double buf[16];
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) {
        __asm__ volatile(
            "vsetvli t0, zero, e8, m1, ta, ma\n\t"   /* vector, vsetvl */
            "csrr t2, vtype\n\t"                     /* scalar */
            "vsetvl t1, zero, t2\n\t"                /* vector, vsetvl */
            "vsetivli t0, 1, e8, m1, ta, ma\n\t"     /* vector, vsetvl */
            "vle8.v v1, (%0)\n\t"                    /* vector, width 0 */
            "vle16.v v2, (%0)\n\t"                   /* vector, width 5 */
            "vle32.v v4, (%0)\n\t"                   /* vector, width 6 */
            "vle64.v v8, (%0)\n\t"                   /* vector, width 7 */
            "vadd.vv v1, v1, v1\n\t"                 /* vector, OP-V */
            "vse8.v v1, (%0)\n\t"                    /* vector, STORE-FP width 0 */
            "flw ft0, 0(%0)\n\t"                     /* scalar LOAD-FP width 2 */
            "fld ft1, 8(%0)\n\t"                     /* scalar LOAD-FP width 3 */
            "fsw ft0, 16(%0)\n\t"                    /* scalar STORE-FP width 2 */
            "fsd ft1, 24(%0)\n\t"                    /* scalar STORE-FP width 3 */
            : : "r"(buf)
            : "t0", "t1", "t2", "ft0", "ft1", "v1", "v2", "v3", "v4", "v5", "v6", "v7",
              "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "memory");
    }
    return 0;
}
"""

# The LMUL weighting (lmul_weighted_vector_ops, vector_insns_unknown_lmul): one pass runs each
# (instruction, weight) below once, so the expected figures are sums of this table. It covers
# every LMUL (m1, m2, m4, m8, mf2, mf8), vsetivli, a widening instruction (counts the source
# LMUL), a load of another element width (counts vtype's LMUL, not its EMUL), whole-register
# loads/stores/moves (their register count whatever vtype says), mask loads/stores (1), a
# vsetvl (register form: what follows counts 1 and as unknown), and vector instructions at the
# start of a translation block after a branch whose vtype was set before it: the first line
# runs under the m4 that the previous pass (or, first time, the set-up below) left, and the
# inner loop's body under a vsetvli outside that loop.
# (asm line, weight of one execution or None if scalar, executions per pass, counts as unknown)
LMUL_PASS = [
    ("vadd.vv v4, v4, v4", 4, 1, False),               # vtype from the previous pass: e32, m4
    ("vsetvli t0, zero, e32, m1, ta, ma", 1, 1, False),
    ("vadd.vv v1, v1, v1", 1, 1, False),
    ("vle32.v v2, (%0)", 1, 1, False),
    ("vsetvli t0, zero, e32, m2, ta, ma", 1, 1, False),
    ("vadd.vv v2, v2, v2", 2, 1, False),
    ("vse32.v v2, (%0)", 2, 1, False),
    ("vwadd.vv v4, v2, v2", 2, 1, False),              # widening e32 m2 -> e64 m4: the source's 2
    ("vsetivli t0, 4, e32, m4, ta, ma", 1, 1, False),
    ("vadd.vv v4, v4, v4", 4, 1, False),
    ("vle8.v v4, (%0)", 4, 1, False),                  # EMUL 1, but vtype says m4
    ("vsetvli t0, zero, e8, m8, ta, ma", 1, 1, False),
    ("vadd.vv v8, v8, v8", 8, 1, False),
    ("vmv.v.i v8, 0", 8, 1, False),
    ("vsetvli t0, zero, e32, mf2, ta, ma", 1, 1, False),
    ("vadd.vv v1, v1, v1", 1, 1, False),               # fractional LMUL: 1
    ("vwadd.vv v2, v1, v1", 1, 1, False),              # widening e32 mf2 -> e64 m1
    ("vsetvli t0, zero, e8, mf8, ta, ma", 1, 1, False),
    ("vadd.vv v1, v1, v1", 1, 1, False),
    ("vl2re32.v v2, (%0)", 2, 1, False),               # whole-register: NFIELDS, not vtype
    ("vs4r.v v4, (%0)", 4, 1, False),
    ("vmv8r.v v8, v16", 8, 1, False),
    ("vmv1r.v v1, v2", 1, 1, False),
    ("vlm.v v0, (%0)", 1, 1, False),                   # mask load/store: 1
    ("vsm.v v0, (%0)", 1, 1, False),
    ("csrr t2, vtype", None, 1, False),                # scalar
    ("vsetvl t1, zero, t2", 1, 1, False),              # register form: vtype unknown here,
    ("vadd.vv v1, v1, v1", 1, 1, True),                # so this counts 1, as unknown
    ("vsetvli t0, zero, e32, m4, ta, ma", 1, 1, False),# outside the inner loop
    ("li t1, 5", None, 1, False),
    ("1:", None, 1, False),                            # 5 passes, each a block after a branch
    ("vadd.vv v4, v4, v4", 4, 5, False),
    ("vfadd.vv v8, v8, v8", 4, 5, False),
    ("addi t1, t1, -1", None, 5, False),
    ("bnez t1, 1b", None, 5, False),
]
LMUL_PASS_VECTOR = sum(k for _, w, k, _ in LMUL_PASS if w is not None)
LMUL_PASS_VSETVL = sum(k for a, _, k, _ in LMUL_PASS if a.startswith("vset"))
LMUL_PASS_WEIGHTED = sum(w * k for _, w, k, _ in LMUL_PASS if w is not None)
LMUL_PASS_UNKNOWN = sum(k for _, _, k, unknown in LMUL_PASS if unknown)
_VREGS = ", ".join(f'"v{i}"' for i in range(24))
LMUL_C = r"""
#include <stdlib.h>
static unsigned char buf[8192] __attribute__((aligned(64)));
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    __asm__ volatile("vsetvli t0, zero, e32, m4, ta, ma" : : : "t0"); /* weight 1, once */
    for (long i = 0; i < n; i++)
        __asm__ volatile(
%s
            : : "r"(buf) : "t0", "t1", "t2", %s, "memory");
    return 0;
}
""" % ("\n".join(f'            "{a}\\n\\t"' for a, *_ in LMUL_PASS), _VREGS)

_CLANG = RV.family_flags("clang")
CLANG_FLAGS = [f"--target={RV.triple}", *_CLANG.arch, *_CLANG.cross_link, "-O2"]
GCC_FLAGS = [*RV.family_flags("gcc").arch, "-O2"]


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """build(name, source, compiler_argv) -> path of a riscv64 executable (memoised)."""
    root = tmp_path_factory.mktemp("icount-progs")
    built = {}

    def _build(name, source, cc):
        if name not in built:
            src = root / f"{name}.c"
            src.write_text(source)
            exe = root / name
            subprocess.run([*cc, str(src), "-o", str(exe)], check=True, capture_output=True)
            built[name] = str(exe)
        return built[name]
    return _build


def counts(prog, *args, vlen=128, mode="tb"):
    c = icount.count_instructions(qemu_prefix(vlen), [prog, *map(str, args)], mode=mode,
                                  timeout=120, env=dict(os.environ))
    assert c.pop("returncode") == 0
    return c


# ---------------------------------------------------------------------------------------------
# Against the real qemu

@needs_qemu
@needs_gcc
def test_loads_and_logs_without_out_file(build):
    # No out=: the line goes to qemu_plugin_outs, i.e. the QEMU log (stderr with -d plugin).
    prog = build("loop_gcc", LOOP_C, [GCC, *GCC_FLAGS])
    proc = subprocess.run([*qemu_prefix(), "-plugin", str(icount.plugin_path()), "-d", "plugin",
                           prog, "10"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("{")]
    assert len(line) == 1, proc.stderr
    assert json.loads(line[0])["insns"] > 10_000  # ld.so + libc start-up alone is ~1e5


@needs_qemu
@needs_gcc
def test_repeatable_and_linear_in_work(build):
    prog = build("loop_gcc", LOOP_C, [GCC, *GCC_FLAGS])
    c1, c2, c3 = (counts(prog, n) for n in (1000, 2000, 3000))  # same argv length
    assert counts(prog, 2000) == c2, "two identical runs must count the same"
    step = c2["insns"] - c1["insns"]
    assert step > 0 and step % 1000 == 0, step  # a whole number of instructions per iteration
    assert c3["insns"] - c2["insns"] == step
    assert c1["vector_insns"] == c2["vector_insns"] == 0  # GCC 12 never emits RVV


@needs_qemu
@needs_gcc
def test_scalar_gcc12_build_executes_no_vector_instructions(build):
    # GCC 12 accepts -march=rv64gcv but neither auto-vectorises nor has intrinsics; with the
    # vector unit switched on and wide, the whole program (ld.so, libc included) has none.
    prog = build("loop_gcc", LOOP_C, [GCC, *GCC_FLAGS])
    c = counts(prog, 5000, vlen=512)
    assert c["insns"] > 5000 and c["vector_insns"] == 0 and c["vsetvl"] == 0


@needs_qemu
@needs_clang
def test_encoding_classification_is_exact(build):
    prog = build("encodings_clang", ENCODINGS_C, [CLANG, *CLANG_FLAGS])
    lo, hi = counts(prog, 1000), counts(prog, 2000)
    assert hi["vector_insns"] - lo["vector_insns"] == 9 * 1000
    assert hi["vsetvl"] - lo["vsetvl"] == 3 * 1000
    # all at m1 (the vsetvl re-sets the vtype it read; the vsetivli follows before any use)
    assert hi["lmul_weighted_vector_ops"] - lo["lmul_weighted_vector_ops"] == 9 * 1000
    assert hi["vector_insns_unknown_lmul"] == lo["vector_insns_unknown_lmul"] == 0
    # 14 asm instructions plus the loop's own scalar ones per pass
    assert (hi["insns"] - lo["insns"]) % 1000 == 0 and hi["insns"] - lo["insns"] > 14 * 1000


@needs_qemu
@needs_clang
def test_rvv_intrinsics_counted_and_falling_with_vlen(build):
    # Intrinsics only (no auto-vectorisation): 4096 floats at e32m8 are 4096 / (VLEN/4)
    # strips of 5 vector instructions (vsetvli, 2 vle32, vfmacc, vse32), exactly.
    prog = build("axpy_clang_novec", AXPY_C,
                 [CLANG, *CLANG_FLAGS, "-fno-vectorize", "-fno-slp-vectorize"])
    by_vlen = {v: counts(prog, 4096, vlen=v) for v in (128, 256, 512)}
    for v, c in by_vlen.items():
        strips = 4096 // (v // 4)
        assert c["vector_insns"] == 5 * strips, (v, c)
        assert c["vsetvl"] == strips, (v, c)
        # at e32m8: 4 instructions of weight 8 and the vsetvli's 1 per strip
        assert c["lmul_weighted_vector_ops"] == (4 * 8 + 1) * strips, (v, c)
        assert c["vector_insns_unknown_lmul"] == 0, (v, c)
    assert by_vlen[128]["insns"] > by_vlen[256]["insns"] > by_vlen[512]["insns"]
    assert counts(prog, 4096, vlen=256) == by_vlen[256]  # repeatable


@needs_qemu
@needs_clang
def test_autovectorised_build_falls_with_vlen(build):
    prog = build("axpy_clang", AXPY_C, [CLANG, *CLANG_FLAGS])
    v128, v512 = counts(prog, 4096, vlen=128), counts(prog, 4096, vlen=512)
    assert v512["vector_insns"] > 0
    assert v512["vector_insns"] < v128["vector_insns"]
    assert v512["insns"] < v128["insns"]


@needs_qemu
@needs_clang
def test_per_insn_mode_agrees_with_per_block_mode(build):
    # mode=tb adds a block's totals at block entry; mode=insn counts each instruction. On a
    # run that exits normally they must agree exactly.
    # The LMUL weighting too: mode=tb weighs a block's instructions by what its translation
    # knew plus one callback per block; mode=insn tracks vtype per instruction.
    prog = build("axpy_clang", AXPY_C, [CLANG, *CLANG_FLAGS])
    tb = counts(prog, 4096, vlen=256)
    assert counts(prog, 4096, vlen=256, mode="insn") == tb
    assert tb["lmul_weighted_vector_ops"] > tb["vector_insns"] > 0  # clang picks LMUL > 1


@needs_qemu
@needs_clang
@pytest.mark.parametrize("vlen", [128, 512])
def test_lmul_weighted_counts_are_exact(build, vlen):
    # LMUL_PASS: every LMUL, widening, whole-register and mask instructions, a vsetvl, and
    # blocks that start with a vector instruction after a branch. libc and ld.so execute no
    # vector instruction (see the GCC 12 test), so the totals are exact, not just differences:
    # the one vsetvli before the loop plus n passes.
    prog = build("lmul_clang", LMUL_C, [CLANG, *CLANG_FLAGS])
    for n in (0, 1, 700):
        by_mode = {mode: counts(prog, n, vlen=vlen, mode=mode) for mode in icount.MODES}
        assert by_mode["insn"] == by_mode["tb"], (n, by_mode)
        c = by_mode["tb"]
        assert c["vector_insns"] == 1 + n * LMUL_PASS_VECTOR, (n, c)
        assert c["vsetvl"] == 1 + n * LMUL_PASS_VSETVL, (n, c)
        assert c["lmul_weighted_vector_ops"] == 1 + n * LMUL_PASS_WEIGHTED, (n, c)
        assert c["vector_insns_unknown_lmul"] == n * LMUL_PASS_UNKNOWN, (n, c)


@needs_qemu
@needs_gcc
def test_crashed_guest_is_an_error_not_a_count(build):
    prog = build("abort_gcc", "#include <stdlib.h>\nint main(void) { abort(); }\n",
                 [GCC, *GCC_FLAGS])
    with pytest.raises(ExecutionError, match="no instruction counts"):
        icount.count_instructions(qemu_prefix(), [prog], timeout=120, check=False)


@needs_qemu
@needs_gcc
def test_failing_exit_status(build):
    prog = build("exit3_gcc", "int main(void) { return 3; }\n", [GCC, *GCC_FLAGS])
    with pytest.raises(ExecutionError, match="exit status 3"):
        icount.count_instructions(qemu_prefix(), [prog], timeout=120)
    c = icount.count_instructions(qemu_prefix(), [prog], timeout=120, check=False)
    assert c["returncode"] == 3 and c["insns"] > 0


@pytest.mark.skipif(not HOST_CC, reason="no host C compiler")
def test_plugin_built_once_and_cached(monkeypatch):
    first = icount.plugin_path()
    assert first.is_file() and first.suffix == ".so"
    icount._built.clear()  # a new process: found in the on-disk cache, not rebuilt
    from rvvkit.jit import build as jit_build
    monkeypatch.setattr(jit_build, "run_compiler",
                        lambda *a, **k: pytest.fail("plugin rebuilt despite the cache"))
    assert icount.plugin_path() == first


# ---------------------------------------------------------------------------------------------
# Helpers alone (no qemu)

def test_plugin_args_escape_commas():
    args = icount.qemu_plugin_args("/tmp/a,b/c.json", plugin="/x,y/lib.so")
    assert args == ["-plugin", "/x,,y/lib.so,out=/tmp/a,,b/c.json"]
    assert icount.qemu_plugin_args("o.json", plugin="l.so", mode="insn")[1].endswith(
        ",mode=insn")
    with pytest.raises(ValueError):
        icount.qemu_plugin_args("o.json", plugin="l.so", mode="fast")


def _line(**totals):
    """A plugin line: the totals, and a per_thread split of them over vCPUs 0 and 2."""
    half = {k: v // 2 for k, v in totals.items()}
    rest = {k: v - half[k] for k, v in totals.items()}
    return dict(totals, per_thread=[dict(vcpu=0, **half), dict(vcpu=2, **rest)],
                per_thread_overflow=None)


def test_read_counts(tmp_path):
    p = tmp_path / "c.json"
    line = _line(insns=10, vector_insns=4, vsetvl=1, lmul_weighted_vector_ops=13,
                 vector_insns_unknown_lmul=0)
    p.write_text(json.dumps(line) + "\n")
    assert icount.read_counts(p) == line
    assert set(icount.COUNT_KEYS) | {"per_thread", "per_thread_overflow"} == set(line)
    over = dict(line, insns=15, per_thread_overflow={"first_vcpu": 256, "insns": 5,
                                                     "vector_insns": 0, "vsetvl": 0,
                                                     "lmul_weighted_vector_ops": 0,
                                                     "vector_insns_unknown_lmul": 0})
    p.write_text(json.dumps(over))
    assert icount.read_counts(p)["per_thread_overflow"]["insns"] == 5  # part of the total
    with pytest.raises(ExecutionError, match="did not exit normally"):
        icount.read_counts(tmp_path / "missing.json")
    for bad in ('{"insns": 10}',
                '{"insns": 10, "vector_insns": 4, "vsetvl": 1}',  # an older plugin's line
                json.dumps({k: v for k, v in line.items() if k != "per_thread"}),  # pre-threads
                json.dumps(dict(line, insns=11)),                  # parts do not add up
                json.dumps(dict(line, per_thread=line["per_thread"][::-1]))):  # unordered
        p.write_text(bad)
        with pytest.raises(ExecutionError, match="malformed"):
            icount.read_counts(p)


def test_per_run():
    lo = {"insns": 1000, "vector_insns": 10, "vsetvl": 2, "lmul_weighted_vector_ops": 40,
          "vector_insns_unknown_lmul": 0}
    hi = {"insns": 1600, "vector_insns": 70, "vsetvl": 14, "lmul_weighted_vector_ops": 280,
          "vector_insns_unknown_lmul": 3}
    assert icount.per_run(hi, lo, 3) == {"insns": 200, "vector_insns": 20, "vsetvl": 4,
                                         "lmul_weighted_vector_ops": 80,
                                         "vector_insns_unknown_lmul": 1}
    with pytest.raises(ValueError):
        icount.per_run(lo, hi, 3)


def test_per_run_per_thread():
    zero = dict.fromkeys(icount.COUNT_KEYS, 0)

    def t(vcpu, insns, vec=0):
        return dict(zero, vcpu=vcpu, insns=insns, vector_insns=vec,
                    lmul_weighted_vector_ops=4 * vec)

    def run(*threads):
        total = {k: sum(x[k] for x in threads) for k in icount.COUNT_KEYS}
        return dict(total, per_thread=list(threads), per_thread_overflow=None)
    lo = run(t(0, 100), t(1, 50))
    hi = run(t(0, 130), t(1, 90, 10), t(3, 7, 1))  # vCPU 3 ran in the larger run only
    d = icount.per_run(hi, lo, 2, whole=True)
    assert d["per_thread"] == [t(0, 15), t(1, 20, 5), dict(t(3, 3, 0), vector_insns=0,
                                                           lmul_weighted_vector_ops=2)]
    assert d["insns"] == 38 and d["per_thread_overflow"] is None
    assert icount.per_run(hi, lo, 2)["per_thread"][2]["insns"] == 3.5  # not whole: a float
    with pytest.raises(ValueError, match="vCPU 1: insns"):
        icount.per_run(run(t(0, 200), t(1, 10)), lo, 1)  # a thread that counted fewer
    with pytest.raises(ValueError, match=r"vCPUs \[1\] ran in the smaller run only"):
        icount.per_run(run(t(0, 200)), lo, 1)
    with pytest.raises(ValueError, match="per-thread counts and the other none"):
        icount.per_run(hi, {k: lo[k] for k in icount.COUNT_KEYS}, 1)
