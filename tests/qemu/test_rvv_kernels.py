"""RVV intrinsic kernels, cross-compiled for riscv64 and run under qemu-user at every VLEN.

Each kernel family is one translation unit (tests/kernel_harness.py: kernels k0, k1, ... with
their support merged as the emitter does) plus a tiny `main` that reads one float buffer from a
file, calls every kernel on pointers into it and writes the buffer back. The buffer holds every
call's inputs (weights already transformed), its output and workspace (both NaN-filled: reading
unwritten memory shows), with sentinel guards between arrays (a write out of bounds shows).

The executable is built with clang-16 (`__riscv_v_intrinsic` = 11000, the 0.11 API) and run at
VLEN 128, 256, 512, 1024 and with tail/mask-agnostic elements set to all ones; a zig cc build
(clang with the 1.0 API) of the same sources must be warning-clean and give the same results.
The assembly proves the intrinsic paths are the ones compiled in. A whole model built by
`rvvkit.build` is driven through `rvvkit_run` by a small main and compared with onnxruntime.
"""
from __future__ import annotations

import functools
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernel_cases.conv import CONV, CONV_WINOGRAD_FORCED, CONV_WINOGRAD_RISCV
from kernel_cases.elementwise import AFFINE, CONCAT, COPY, NARY, TRANSPOSE, UNARY
from kernel_cases.gemm import GEMM, MATMUL
from kernel_cases.pool import GLOBAL_POOL, LRN, POOL, SOFTMAX
from kernel_harness import C_HDR, call_arrays, output_index, translation_unit

from rvvkit.codegen.kernels.gemm.rvv import vname
from rvvkit.codegen.kernels.gemm.rvv_lmul import pair_plan, uk_plan
from rvvkit.jit.targets import riscv

RISCV = riscv()

SYSROOT = Path(RISCV.sysroot)
QEMU = shutil.which("qemu-riscv64")
CLANG = shutil.which("clang-16")
pytestmark = [pytest.mark.qemu, pytest.mark.skipif(
    QEMU is None or CLANG is None or shutil.which("ld.lld-16") is None or not SYSROOT.is_dir(),
    reason="needs qemu-riscv64, clang-16 + lld-16 and the riscv64 sysroot (scripts/setup.sh)")]

WARN = ["-Wall", "-Wextra", "-Werror"]
CLANG_RVV = [CLANG or "clang-16", "--target=riscv64-linux-gnu", "-march=rv64gcv", "-O2",
             "-fuse-ld=lld", "-std=c11"]
# zig's clang 19+ (RVV intrinsics API 1.0); linked against glibc, run with the Debian sysroot
ZIG_RVV = [sys.executable, "-m", "ziglang", "cc", "--target=riscv64-linux-gnu",
           "-mcpu=baseline_rv64+v", "-O2", "-std=c11"]
CPUS = {f"vlen{v}": RISCV.cpu_string(v) for v in RISCV.vlens}
CPUS["vlen256_ta_ma_ones"] = RISCV.cpu_string(256, tail_ones=True)
CPUS["vlen128_ta_ma_ones"] = RISCV.cpu_string(128, tail_ones=True)

GUARD_VALUE = np.float32(-12345.5)
GUARD = 16        # floats of sentinel between arrays (and 64-byte alignment of each array)


def _zig_available() -> str:
    """'' when `python -m ziglang` works, else why not."""
    try:
        proc = subprocess.run([sys.executable, "-m", "ziglang", "version"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"ziglang not runnable: {e}"
    return "" if proc.returncode == 0 else "ziglang not installed (pip install ziglang)"


class Family:
    """Calls of lowered kernels on given inputs, as one riscv64 program.

    calls: list of (Lowered, [input arrays], output shape, reference output)."""

    def __init__(self, name: str, calls):
        self.name, self.calls = name, calls
        # buffer layout: [guard][array][guard][array]...
        chunks, self.out_at, stmts = [np.full(GUARD, GUARD_VALUE, np.float32)], [], []
        at = GUARD
        for i, (lo, inputs, out_shape, _) in enumerate(calls):
            arrs = call_arrays(lo, inputs, out_shape)
            offs = []
            for j, a in enumerate(arrs):
                size = -(-a.size // GUARD) * GUARD
                flat = np.full(size + GUARD, GUARD_VALUE, np.float32)
                flat[:a.size] = a.reshape(-1)
                if j == output_index(lo, len(inputs)):
                    self.out_at.append((at, out_shape))
                offs.append(at)
                chunks.append(flat)
                at += size + GUARD
            stmts.append(f"  k{i}({', '.join(f'buf + {o}' for o in offs)});")
        self.buffer = np.concatenate(chunks)
        main = f"""
int main(int argc, char **argv) {{
  if (argc != 3) return 2;
  float *buf = (float *)malloc({self.buffer.size} * sizeof(float));
  FILE *f = fopen(argv[1], "rb");
  if (!buf || !f || fread(buf, sizeof(float), {self.buffer.size}, f) != {self.buffer.size})
    return 3;
  fclose(f);
{chr(10).join(stmts)}
  f = fopen(argv[2], "wb");
  if (!f || fwrite(buf, sizeof(float), {self.buffer.size}, f) != {self.buffer.size}) return 4;
  fclose(f);
  free(buf);
  return 0;
}}
"""
        self.source = translation_unit(C_HDR, [lo.kernel for lo, _, _, _ in calls]) + main

    def write(self, d: Path) -> Path:
        src = d / f"{self.name}.c"
        src.write_text(self.source)
        self.buffer.tofile(d / f"{self.name}.in")
        return src

    def check(self, out: np.ndarray, rtol=1e-4, atol=1e-4):
        """Compare every output with its reference and check the guards are intact."""
        for i, ((at, shape), (lo, _, _, ref)) in enumerate(zip(self.out_at, self.calls)):
            y = out[at:at + math.prod(shape)].reshape(shape)
            np.testing.assert_allclose(y, ref, rtol=rtol, atol=atol,
                                       err_msg=f"{self.name} call {i} ({lo.kernel.hint})")
        # everything that was a guard before the run must still be one
        was_guard = self.buffer == GUARD_VALUE
        bad = np.flatnonzero(was_guard & (out != GUARD_VALUE))
        assert bad.size == 0, f"{self.name}: writes out of bounds at floats {bad[:8]}"


def compile_rvv(src: Path, exe: Path, cmd=CLANG_RVV, extra=()):
    proc = subprocess.run([*cmd, *WARN, *extra, str(src), "-o", str(exe), "-lm"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), \
        f"{' '.join(cmd)} failed:\n{proc.stderr[:6000]}"
    return exe


def run_qemu(exe: Path, cpu: str, inp: Path, timeout=120) -> np.ndarray:
    out = inp.with_suffix(f".{abs(hash(cpu))}.out")
    proc = subprocess.run([QEMU, "-L", str(SYSROOT), "-cpu", cpu, str(exe), str(inp), str(out)],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"qemu ({cpu}) exit {proc.returncode}: {proc.stderr[-2000:]}"
    return np.fromfile(out, np.float32)


# ------------------------------------------------------------------------------ the families
# Each family is one program running every case of the shared tables (tests/kernel_cases/).

def calls(cases):
    """(Lowered, inputs, output shape, reference) of each case."""
    out = []
    for case in cases:
        inputs, ref = case.data()
        out.append((case.lower(), inputs, ref.shape, ref))
    return out


FAMILIES = {
    "conv": CONV + CONV_WINOGRAD_FORCED + CONV_WINOGRAD_RISCV,   # RISCV: the Winograd branch
    "gemm": GEMM + MATMUL,
    "elementwise": NARY + UNARY + TRANSPOSE + CONCAT + COPY + AFFINE,
    "pool": POOL + GLOBAL_POOL + LRN + SOFTMAX,
}


@functools.lru_cache(maxsize=None)
def _family(name):
    return Family(name, calls(FAMILIES[name]))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """name -> (Family, executable, input file), all built with clang-16."""
    d = tmp_path_factory.mktemp("rvv")
    out = {}
    for name in FAMILIES:
        fam = _family(name)
        src = fam.write(d)
        out[name] = (fam, compile_rvv(src, d / name), d / f"{name}.in")
    return out


@pytest.mark.parametrize("cpu", sorted(CPUS))
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_rvv_kernels_match_numpy(built, family, cpu):
    fam, exe, inp = built[family]
    fam.check(run_qemu(exe, CPUS[cpu], inp))


# ------------------------------------------------------------------- zig cc: intrinsics API 1.0

ZIG_WHY = _zig_available()


@pytest.fixture(scope="module")
def zig_built(built, tmp_path_factory):
    if ZIG_WHY:
        pytest.skip(ZIG_WHY)
    d = tmp_path_factory.mktemp("zig")
    out = {}
    for name, (fam, _, inp) in built.items():
        src = fam.write(d)
        out[name] = (fam, compile_rvv(src, d / name, ZIG_RVV), inp)
    return out


@pytest.mark.parametrize("cpu", ["vlen128_ta_ma_ones", "vlen1024"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_rvv_kernels_zig_api_1_0(zig_built, family, cpu):
    fam, exe, inp = zig_built[family]
    fam.check(run_qemu(exe, CPUS[cpu], inp))


def test_zig_defines_api_1_0(tmp_path):
    """The zig build really is the 1.0 API (and clang-16 the 0.11 one)."""
    if ZIG_WHY:
        pytest.skip(ZIG_WHY)
    src = tmp_path / "v.c"
    src.write_text("int v = __riscv_v_intrinsic;\n")
    for cmd, lo, hi in ((ZIG_RVV, 1000000, 10 ** 9), (CLANG_RVV, 11000, 11999)):
        proc = subprocess.run([*cmd, "-E", "-P", str(src)], capture_output=True, text=True,
                              check=True)
        value = int(re.search(r"int v = (\d+)", proc.stdout).group(1))
        assert lo <= value <= hi, (cmd[0], value)


def _zig_model(name: str):
    """shufflenet (a light model's kernel families), or a 4-bit decoder: float activations
    and bfloat16 scales with a 4-bit embedding, or int8 activations with the LM head tied to
    the embedding (the gather from the head's layout), or float16 (its scales widened from
    16 bits as they are read)."""
    from rvvkit.zoo import llm as zoo_llm
    from rvvkit.llm.quantize import quantize_model
    from rvvkit.zoo import light_model
    if name == "shufflenet":
        return light_model(name), None
    if name == "decoder_half":
        return zoo_llm.decoder(zoo_llm.DecoderConfig(hidden=64, heads=4, kv_heads=2, layers=1,
                                                     intermediate=48, bits=4, block=16,
                                                     half=True)), 24
    cfg = zoo_llm.DecoderConfig(hidden=64, heads=4, kv_heads=2, layers=1, intermediate=48,
                                bits=4, block=16, bf16_scales=True,
                                accuracy=4 if "acc4" in name else 0, tied="tied" in name)
    return quantize_model(zoo_llm.decoder(cfg), 4, 16, embeddings=True)[0], 24


@pytest.mark.parametrize("model", ["shufflenet", "decoder", "decoder_acc4_tied",
                                   "decoder_half"])
@pytest.mark.parametrize("lang", [["-x", "c", "-std=c11"], ["-x", "c++", "-std=c++11"]],
                         ids=["c", "c++"])
def test_zig_compiles_model_sources_clean(lang, model, tmp_path):
    """A whole generated translation unit (every kernel family of a light model; the decoder
    kernels) compiles warning-free with the 1.0 API, as C and as C++."""
    if ZIG_WHY:
        pytest.skip(ZIG_WHY)
    import rvvkit
    src = tmp_path / f"{model}.c"
    onnx_model, bound = _zig_model(model)
    src.write_text(rvvkit.build(onnx_model, max_seq=bound).c_source)
    cmd = [c for c in ZIG_RVV if not c.startswith("-std")]
    proc = subprocess.run([*cmd, *WARN, *lang, "-c", str(src), "-o", str(tmp_path / "m.o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr[:4000]


# --------------------------------------------------- the intrinsic paths are what got compiled

def _functions(asm: str):
    """name -> assembly text of each function in clang's -S output."""
    out, cur = {}, None
    for line in asm.splitlines():
        m = re.match(r"^([A-Za-z_][\w.]*):", line)     # clang's clones: rvk_parallel.7
        if m:
            cur = m.group(1)
            out[cur] = []
        elif cur:
            out[cur].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def assembly(built, tmp_path_factory):
    d = tmp_path_factory.mktemp("asm")
    out = {}
    for name, (fam, _, _) in built.items():
        src = fam.write(d)
        cmd = [c for c in CLANG_RVV if not c.startswith("-fuse-ld")]   # no link: unused
        proc = subprocess.run([*cmd, *WARN, "-S", str(src), "-o", "-"],
                              capture_output=True, text=True, check=True)
        out[name] = _functions(proc.stdout)
    return out


def _vsetvli_in_loops(text: str) -> int:
    """vsetvli instructions between a loop header label and the last branch back to it."""
    lines = text.splitlines()
    count = 0
    for i, line in enumerate(lines):
        m = re.match(r"^(\.\w+):.*Loop Header", line)
        if m:
            back = [j for j, x in enumerate(lines) if j > i and re.search(
                rf"[\s,]{re.escape(m.group(1))}$", x.rstrip())]
            if back:
                count += sum("vsetvli" in x for x in lines[i:back[-1]])
    return count


def _checked_micro_kernels(assembly, kind: str, plan):
    """Checks every micro-kernel of `kind` ("" or "_pair") in the gemm and conv families:
    vfmacc.vf (or vfmul.vf) with scalar loads of A, a vsetvli per LMUL of its plan, no vector
    spills; returns (kernels seen, kernels with vfmacc.vf)."""
    seen = fmacc = 0
    pattern = rf"rvk_gemm_micro_(\d+)x(\d+)(?:_indirect_([ab]))?{kind}(?:_to_y\w*)?$"
    for fam in ("gemm", "conv"):
        for name, text in assembly[fam].items():
            m = re.match(pattern, name)
            if not m or re.search(r"_lmul\d(_|$)", name):
                continue
            seen += 1
            mr, nr, ind = int(m.group(1)), int(m.group(2)), m.group(3) or ""
            # a variant called from two VLEN ranges stays a function of its own (not inlined);
            # a pair variant's row groups are functions of their own (_rows<r0>), also those
            # of its fallback panel count (_p2_rows<r0>)
            names = {vname(name, L) for L in (1, 2, 4, 8)}
            group = r"(_p\d)?_rows\d+(?=_|$)"
            variants = [t for n, t in assembly[fam].items() if re.sub(group, "", n) in names]
            for n, t in assembly[fam].items():
                if re.search(r"_rows\d+(_|$)", n) and re.sub(group, "", n) in names:
                    # clang 16 kept a vsetvli per k step in every row group but a function's
                    # first: hence a function per group, whose k loop has none
                    assert _vsetvli_in_loops(t) == 0, n
            text = "\n".join([text] + variants)
            # (clang propagates a constant kb = 1 into a kernel only used with K = 1: vfmul)
            assert re.search(r"vf(macc|mul)\.vf", text) and "flw" in text, name
            fmacc += "vfmacc.vf" in text
            for _, lmul in plan(mr, nr, ind):
                if lmul:
                    assert re.search(rf"vsetvli\s+\w+, \w+, e32, m{lmul}\b", text), (name, lmul)
            assert not re.search(r"vs\dr\.v|vl\dre", text), f"{name}: vector spills"
    return seen, fmacc


def test_gemm_micro_kernels_use_vfmacc_at_every_lmul(assembly):
    """Every micro-kernel is an RVV kernel: vfmacc.vf with scalar broadcasts of the packed A
    panel, one LMUL variant per VLEN range of its plan, no vector spills."""
    seen, fmacc = _checked_micro_kernels(assembly, "", uk_plan)
    assert seen >= 5 and fmacc >= 0.9 * seen


def test_gemm_panel_pairs_at_large_vlen(assembly):
    """The pair micro-kernels (two adjacent panels per call, for VLEN >= 512) exist for the
    tables' GEMMs, have a variant per LMUL of their plan, and keep their accumulators in
    registers."""
    seen, fmacc = _checked_micro_kernels(assembly, "_pair", pair_plan)
    assert seen >= 3 and fmacc >= 0.85 * seen


@pytest.mark.parametrize("family,pattern", [
    ("conv", r"vfmacc\.vf"),                        # depthwise grid + epilogues
    ("conv", r"vluxei32\.v"),                       # Winograd: tile corners in, ...
    ("conv", r"vsuxei32\.v"),                       # ... and out
    ("elementwise", r"vf(add|sub|rsub|mul|div|rdiv|max|min|madd)\.v[vf]"),
    ("pool", r"vfred(usum|max)\.vs"),
    ("pool", r"vlse32\.v"),
])
def test_kernels_use_intrinsics(assembly, family, pattern):
    text = "\n".join(assembly[family].values())
    assert re.search(pattern, text), f"{family}: no {pattern}"


def test_every_kernel_has_vector_code(assembly):
    """Each exported kernel k<i> executes vector instructions (its own or its helpers', split
    parts included),
    except the scalar fall-backs: element-wise sigmoid/tanh, softmax over a non-last axis,
    LRN with an unusual beta, a one-element output, a pooling window larger than the input."""
    vector = re.compile(r"\bv(le|se|lse|sse)32\.v|\bvf\w+\.v")
    for fam_name, funcs in assembly.items():
        fam = _family(fam_name)
        # per function, once: the functions it names, and whether it has vector code of its
        # own (the pool's code, rvk_parallel or a clone of it specialised for one task
        # function, is not the kernel's work, but it leads to the task function)
        calls = {fn: set(re.findall(r"\b([A-Za-z_][\w.]*)", text)) & funcs.keys()
                 for fn, text in funcs.items()}
        own = {fn: not fn.startswith(("rvk_pool", "rvk_parallel")) and bool(vector.search(text))
               for fn, text in funcs.items()}
        for i, (lo, _, out_shape, _) in enumerate(fam.calls):
            seen, todo = set(), [f"k{i}"]
            while todo:                         # the kernel and every helper it calls
                fn = todo.pop()
                if fn not in seen and fn in funcs:
                    seen.add(fn)
                    todo += calls[fn]
            if any(own[fn] for fn in seen):
                continue
            # the documented scalar fall-backs: they call expf/tanhf/powf, have one element,
            # or are a pooling whose every window crosses the border (no vector interior)
            assert re.search(r"\b(expf|tanhf|powf)\(", lo.kernel.body) or \
                math.prod(out_shape) == 1 or \
                (lo.kernel.hint.endswith("pool") and "__riscv_" not in lo.kernel.body), \
                f"{fam_name} k{i} ({lo.kernel.hint}) has no vector code"


# ---------------------------------------------------------------- a whole model via rvvkit_run

MODEL_MAIN = """
int main(int argc, char **argv) {
  if (argc != 4) return 2;
  const long nw = rvvkit_weights_floats(), na = rvvkit_arena_floats();
  float *w = (float *)malloc((size_t)(nw + 1) * sizeof(float));
  float *a = (float *)malloc((size_t)(na + 1) * sizeof(float));
  const void *in[8];
  void *out[8];
  FILE *f = fopen(argv[1], "rb");
  if (!w || !a || !f || fread(w, sizeof(float), (size_t)nw, f) != (size_t)nw) return 3;
  fclose(f);
  f = fopen(argv[2], "rb");
  for (int i = 0; i < rvvkit_num_inputs(); ++i) {
    const long n = rvvkit_input_elems(i);
    float *p = (float *)malloc((size_t)n * sizeof(float));
    if (!p || fread(p, sizeof(float), (size_t)n, f) != (size_t)n) return 4;
    in[i] = p;
  }
  fclose(f);
  for (int i = 0; i < rvvkit_num_outputs(); ++i)
    out[i] = (float *)malloc((size_t)rvvkit_output_elems(i) * sizeof(float));
  for (long i = 0; i < na; ++i) a[i] = NAN;   /* reading an unwritten arena float shows */
  if (rvvkit_run(w, a, in, out) != 0) return 5;
  f = fopen(argv[3], "wb");
  for (int i = 0; i < rvvkit_num_outputs(); ++i)
    if (fwrite(out[i], sizeof(float), (size_t)rvvkit_output_elems(i), f)
        != (size_t)rvvkit_output_elems(i)) return 6;
  fclose(f);
  return 0;
}
"""


def _model():
    """Most kernel families once, through the whole pipeline (fusion, plan, arena)."""
    from onnx import helper
    from conftest import make_model, rand
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        node("LeakyRelu", ["c1"], ["r1"], alpha=0.2),
        node("Conv", ["r1", "wd", "bd"], ["c2"], group=10, pads=[1, 1, 1, 1]),
        node("Add", ["c2", "r1"], ["s1"]),
        node("BatchNormalization", ["s1", "g", "be", "mu", "var"], ["bn"]),
        node("Clip", ["bn", "lo", "hi"], ["r2"]),
        node("MaxPool", ["r2"], ["p1"], kernel_shape=[3, 3], strides=[2, 2]),
        node("Conv", ["p1", "wp"], ["c3"]),
        node("Sub", ["c3", "half"], ["d1"]),
        node("Div", ["d1", "two"], ["d2"]),
        node("Transpose", ["d2"], ["t"], perm=[0, 1, 3, 2]),
        node("AveragePool", ["t"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("GlobalMaxPool", ["ap"], ["gmp"]),
        node("Flatten", ["ap"], ["f"]),
        node("MatMul", ["f", "fw"], ["mm"]),
        node("LogSoftmax", ["mm"], ["y"], axis=1),
    ]
    inits = {"w1": rand(10, 3, 3, 3, seed=1, scale=0.3), "b1": rand(10, seed=2, scale=0.1),
             "wd": rand(10, 1, 3, 3, seed=3, scale=0.3), "bd": rand(10, seed=4, scale=0.1),
             "g": rand(10, seed=5) + 1.0, "be": rand(10, seed=6),
             "mu": rand(10, seed=7), "var": np.abs(rand(10, seed=8)) + 0.5,
             "lo": np.array(-1.0, np.float32), "hi": np.array(1.5, np.float32),
             "wp": rand(21, 10, 1, 1, seed=9, scale=0.3),
             "half": np.full((21, 1, 1), 0.5, np.float32), "two": np.array(2.0, np.float32),
             "fw": rand(21 * 8 * 8, 37, seed=10, scale=0.05)}
    return make_model(nodes, [("x", (1, 3, 17, 17))], ["y", "gmp"], inits, name="rvv_mixed")


@pytest.mark.parametrize("cpu", ["vlen128", "vlen256_ta_ma_ones", "vlen1024"])
def test_whole_model_through_rvvkit_run(cpu, tmp_path_factory):
    import rvvkit
    from conftest import rand, run_ort
    d = tmp_path_factory.getbasetemp() / "rvv_model"
    exe = d / "model"
    model = _model()
    feeds = {"x": rand(1, 3, 17, 17, seed=12)}
    if not exe.exists():
        d.mkdir(exist_ok=True)
        art = rvvkit.build(model)
        assert "__riscv_vfmacc_vf_f32m" in art.c_source
        src = d / "model.c"
        src.write_text(art.c_source + "#include <stdio.h>\n#include <stdlib.h>\n" + MODEL_MAIN)
        np.asarray(art.weights_array(), np.float32).tofile(d / "w.bin")
        feeds["x"].tofile(d / "x.bin")
        compile_rvv(src, d / "model.tmp")
        (d / "model.tmp").rename(exe)
    out = d / f"{cpu}.out"
    proc = subprocess.run([QEMU, "-L", str(SYSROOT), "-cpu", CPUS[cpu], str(exe),
                           str(d / "w.bin"), str(d / "x.bin"), str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    flat = np.fromfile(out, np.float32)
    ref = run_ort(model, feeds)
    at = 0
    for name in ("y", "gmp"):
        want = ref[name]
        got = flat[at:at + want.size].reshape(want.shape)
        at += want.size
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)
    assert at == flat.size
