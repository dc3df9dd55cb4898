"""The generated C's call-free math (rvk_expf, rvk_tanhf, rvk_sigmoidf, rvk_geluf in codegen/c.py's
KERNEL_PRELUDE), built with the production flags, against float64 numpy over a dense sweep of
the float range that matters and the special values: the error bounds the comments claim, and
NaN in, NaN out."""
from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest

from rvvkit.codegen.c import KERNEL_PRELUDE
from rvvkit.jit.compilers import compile_flags, resolve_compiler

FUNCS = ("rvk_expf", "rvk_tanhf", "rvk_sigmoidf", "rvk_geluf")
REFS = {"rvk_expf": np.exp, "rvk_tanhf": np.tanh,
        "rvk_sigmoidf": lambda x: 1.0 / (1.0 + np.exp(-x)),
        "rvk_geluf": lambda x: 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))}
# max ulp inside each function's exact domain (expf: between its clamps; sigmoid: where e^-x is
# not capped), and the abs error allowed outside it
BOUNDS = {"rvk_expf": (2, None), "rvk_tanhf": (4, None), "rvk_sigmoidf": (3, 2e-35)}
DOMAIN = {"rvk_expf": (-87.3, 88.7), "rvk_tanhf": (-np.inf, np.inf),
          "rvk_sigmoidf": (-80.0, np.inf)}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    import cffi
    d = tmp_path_factory.mktemp("prelude")
    body = "".join(f"void v_{f}(const float *x, float *y, long n) "
                   f"{{ for (long i = 0; i < n; ++i) y[i] = {f}(x[i]); }}\n" for f in FUNCS)
    src = d / "m.c"
    src.write_text(KERNEL_PRELUDE + body)
    so = d / "m.so"
    cmd = ["gcc"] + compile_flags(resolve_compiler("gcc")) + ["-Werror", str(src), "-o",
                                                                str(so), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    ffi = cffi.FFI()
    ffi.cdef("".join(f"void v_{f}(const float *x, float *y, long n);" for f in FUNCS))
    return ffi, ffi.dlopen(str(so))


def _call(lib, name, x):
    ffi, so = lib
    x = np.ascontiguousarray(x, np.float32)
    y = np.empty_like(x)
    getattr(so, f"v_{name}")(ffi.cast("float *", x.ctypes.data),
                             ffi.cast("float *", y.ctypes.data), x.size)
    return y


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in representable floats (both finite, same sign or zero)."""
    ia = a.view(np.int32).astype(np.int64)
    ib = b.view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    return np.abs(ia - ib)


def test_gelu_error_bound(lib):
    """GELU through erf's Abramowitz-Stegun form: within 1e-7 |x| (plus rounding); the limits
    at the infinities, NaN kept."""
    x = np.linspace(-12, 12, 240001).astype(np.float32)
    ref = REFS["rvk_geluf"](x.astype(np.float64))
    err = np.abs(_call(lib, "rvk_geluf", x) - ref)
    assert np.all(err <= 1.2e-7 * np.abs(x) + 6e-7 * np.abs(ref) + 1e-30)   # + ~5 ulp
    special = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30], np.float32)
    got = _call(lib, "rvk_geluf", special)
    assert np.isnan(got[0]) and got[1] == np.inf and got[3] == np.float32(1e30)
    assert abs(got[2]) < 1e-21 and abs(got[4]) < 1e-21   # -|x|/2 erfc(10/sqrt2) at most


@pytest.mark.parametrize("name", FUNCS[:3])
def test_error_bound(lib, name):
    x = np.concatenate([np.linspace(-90, 90, 400001), np.geomspace(1e-8, 90, 20001),
                        -np.geomspace(1e-8, 90, 20001)]).astype(np.float32)
    got = _call(lib, name, x)
    with np.errstate(over="ignore"):
        ref64 = REFS[name](x.astype(np.float64))
        ref = ref64.astype(np.float32)
    max_ulp, tiny = BOUNDS[name]
    lo, hi = DOMAIN[name]
    inside = (x > lo) & (x < hi)
    ulps = _ulps(got[inside], ref[inside])
    assert ulps.max() <= max_ulp, f"{name}: {ulps.max()} ulp at x={x[inside][ulps.argmax()]}"
    if tiny is not None:
        assert np.abs(got[~inside] - ref64[~inside]).max() <= tiny


def test_exp_reaches_the_subnormals_and_overflows_as_expf(lib):
    """Below -87.3 e^x is subnormal: two normal factors of 2^n round once, so the error is
    the polynomial's plus half a subnormal step; above ln(FLT_MAX) it is inf; e^-inf is 0."""
    x = np.linspace(-103.9, -87.3, 100001).astype(np.float32)
    ref = np.exp(x.astype(np.float64))
    err = np.abs(_call(lib, "rvk_expf", x).astype(np.float64) - ref)
    assert np.all(err <= 2.5e-7 * ref + 1.5e-45), float((err / ref).max())
    big = np.array([88.73, 89.0, 1e30, np.inf], np.float32)
    assert np.all(np.isinf(_call(lib, "rvk_expf", big)))
    assert np.all(_call(lib, "rvk_expf", np.array([-104.0, -1e30, -np.inf], np.float32))
                  == 0.0)


@pytest.mark.parametrize("name", FUNCS[:3])
def test_special_values(lib, name):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30], np.float32)
    got = _call(lib, name, x)
    assert np.isnan(got[0])
    assert np.all(np.isfinite(got[1:]) | np.isinf(got[1:]))
    if name == "rvk_sigmoidf":   # saturates to exactly 1 where float's sigmoid does
        assert np.all(_call(lib, name, np.array([17.0, 30.0, 80.0], np.float32)) == 1.0)
    if name != "rvk_expf":   # tanh and sigmoid saturate exactly where the true value does
        with np.errstate(over="ignore"):
            ref = REFS[name](x[1:].astype(np.float64))
        np.testing.assert_allclose(got[1:], ref, rtol=1e-6, atol=1e-30)


def test_the_x86_softmax_exp_gives_the_c_helpers_bits(lib, tmp_path):
    """The softmax row's e^x on AVX2/AVX-512 lanes (kernels/reduce/softmax_x86.py) takes the
    C helper's steps (codegen/expmath.py): the same bits, over the whole range."""
    from x86_support import host_has
    from rvvkit.codegen.kernels.reduce import softmax_x86
    if not host_has("avx2", "fma", "f16c"):
        pytest.skip("the host has no AVX2/FMA/F16C: the x86 form is not compiled")
    import cffi
    loop = ("void v_x86(const float *x, float *y, long n) {\n#if defined(__AVX512F__)\n"
            "for (long i = 0; i < n; i += 16) _mm512_storeu_ps(y + i, "
            "rvk_vexp_x86(_mm512_loadu_ps(x + i)));\n#else\n"
            "for (long i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, "
            "rvk_vexp_x86(_mm256_loadu_ps(x + i)));\n#endif\n}\n")
    src = tmp_path / "x.c"
    src.write_text(KERNEL_PRELUDE + "".join(softmax_x86.support().values()) + loop)
    so = tmp_path / "x.so"
    cmd = ["gcc"] + compile_flags(resolve_compiler("gcc")) + [str(src), "-o", str(so), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    ffi = cffi.FFI()
    ffi.cdef("void v_x86(const float *x, float *y, long n);")
    x86 = ffi.dlopen(str(so))
    x = np.concatenate([np.linspace(-110, 95, 200000), [np.nan, np.inf, -np.inf, 0.0],
                        np.zeros(12)]).astype(np.float32)
    y = np.empty_like(x)
    x86.v_x86(ffi.cast("float *", x.ctypes.data), ffi.cast("float *", y.ctypes.data), x.size)
    want = _call(lib, "rvk_expf", x)
    assert np.isnan(y[200000]) and np.isnan(want[200000])
    keep = ~np.isnan(want)
    np.testing.assert_array_equal(y[keep].view(np.int32), want[keep].view(np.int32))
