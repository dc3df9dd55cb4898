"""rvvkit.QDQAdd (ops/quant/island.py): f = relu?(DQ(a) + DQ(b)), y = Q(f), with onnxruntime's
float operations, each rounded on its own; a float operand is read as it is, and f is written
(as `y1`) when something else reads it. The compiler flags allow contraction
(-ffp-contract=fast), which would fuse a product into the sum (one rounding fewer): the RVV
form spells every operation as an intrinsic, the portable form puts a no-op clamp between each
product and the sum. QuantizeLinear divides by its scale (a multiply by the reciprocal can round
differently). Clamping to [lo, hi] after rounding equals onnxruntime's clamp before it: the
bounds are integers and rounding is monotonic. Threads: parts of BLOCK elements."""
from __future__ import annotations

from typing import Sequence, Tuple

from ....ops.quant.numerics import qrange
from ...cfmt import flt
from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec
from ...loops import cdiv
from ...parallel import Split
from ...rvv import guarded, header
from ..math.elementwise import BLOCK
from .elementwise import round_sat

declare_spec("qdq_add", ("n_elems", "operands", "out_dtype", "y_q", "relu", "keep_float"))

NO_FMA = "-3.40282347e+38f"   # -FLT_MAX: a clamp that changes nothing but stops contraction

# An operand: (dtype, scale, zero point); a float32 one has no scale (0.0, 0)
Operand = Tuple[str, float, int]


def portable_sum(operands: Sequence[Operand], names: Sequence[str]) -> str:
    """C statements declaring float `s` = da + db (the CUDA emulator shares them)."""
    lines = []
    for (dt, sc, zp), name, f in zip(operands, names, ("fa", "fb")):
        if dt == "float32":
            lines.append(f"const float {f} = {name};")
        else:
            lines += [f"float {f} = (float)((int){name} - {zp}) * {flt(sc)};",
                      f"{f} = {f} > {NO_FMA} ? {f} : {NO_FMA};"]
    return "\n".join(lines + ["float s = fa + fb;"])


def quantize_sum(y_q: Tuple[float, int], relu: bool, out_dtype: str, y: str, f: str) -> str:
    """C statements: [relu], [`f` = s], `y` = Q(s) (quant_ew.quantize's clamp and rounding)."""
    sy, zy = y_q
    lo, hi = qrange(out_dtype)
    ct = "int8_t" if out_dtype == "int8" else "uint8_t"
    return (("s = s > 0.0f ? s : 0.0f;\n" if relu else "") + (f"{f} = s;\n" if f else "")
            + f"float v = s / {flt(sy)};\n" + round_sat("v", lo - zy, hi - zy)
            + f"\n{y} = ({ct})(q + {zy});")


def _rvv_operand(name: str, op: Operand) -> str:
    """float32 m4 vector of the operand's values at i: a quantized one's difference widened
    exactly to int16, then to float (both exact), one multiply; uint8 read as int8 with its
    top bit flipped."""
    dt, scale, zp = op
    if dt == "float32":
        return f"__riscv_vle32_v_f32m4({name} + i, vl)"
    x = f"__riscv_vle8_v_i8m1((const int8_t *){name} + i, vl)"
    if dt == "uint8":
        x, zp = f"__riscv_vxor_vx_i8m1({x}, (int8_t)-128, vl)", zp - 128
    return (f"__riscv_vfmul_vf_f32m4(__riscv_vfwcvt_f_x_v_f32m4("
            f"__riscv_vwsub_vx_i16m2({x}, (int8_t)({zp}), vl), vl), {flt(scale)}, vl)")


def _rvv(start: str, n: str, operands, out_dtype: str, y_q, relu: bool, keep: bool) -> str:
    sy, zy = y_q
    lo, hi = qrange(out_dtype)
    extra = ("        s = __riscv_vfmax_vf_f32m4(s, 0.0f, vl);\n" if relu else "") + \
        ("        __riscv_vse32_v_f32m4(y1 + i, s, vl);\n" if keep else "")
    return f"""    /* the quotient rounds to int16 in the narrowing conversion (frm: nearest even), which
     * saturates; + zy and the clamp then run on half-width registers */
    for (long i = {start}; i < {n};) {{
        const size_t vl = __riscv_vsetvl_e32m4((size_t)({n} - i));
        const vfloat32m4_t fa = {_rvv_operand("a", operands[0])};
        const vfloat32m4_t fb = {_rvv_operand("b", operands[1])};
        vfloat32m4_t s = __riscv_vfadd_vv_f32m4(fa, fb, vl);
{extra}        vint16m2_t h = __riscv_vfncvt_x_f_w_i16m2(__riscv_vfdiv_vf_f32m4(s, {flt(sy)}, vl), vl);
        h = __riscv_vsadd_vx_i16m2(h, (int16_t)({zy}), vl);
        h = __riscv_vmin_vx_i16m2(__riscv_vmax_vx_i16m2(h, {lo}, vl), {hi}, vl);
        __riscv_vse8_v_i8m1((int8_t *)y + i, __riscv_vnsra_wx_i8m1(h, 0, vl), vl);
        i += (long)vl;
    }}"""


def qdq_add(n: int, operands: Sequence[Operand], out_dtype: str, y_q: Tuple[float, int],
            relu: bool, params: Tuple[Param, ...]) -> Lowered:
    """params: every node input that is present, then y and (when f is kept) y1."""
    keep = any(p.name == "y1" for p in params)
    data = ("a", "b", "y", "y1")
    voids = " ".join(f"(void){p.name};" for p in params if p.name not in data)
    stmts = (portable_sum(operands, ("a[i]", "b[i]")) + "\n"
             + quantize_sum(y_q, relu, out_dtype, "y[i]", "y1[i]" if keep else ""))
    body = "\n".join("        " + line for line in stmts.splitlines())
    # parts: blocks of BLOCK elements (a multiple of every vector length), [i0, i1)
    blocks = cdiv(n, BLOCK)
    if blocks > 1:
        start, end = "i0", "i1"
        span = (f"    const long i0 = (long)rvk_lo * {BLOCK}, i1 = (long)rvk_hi * {BLOCK} < {n} "
                f"? (long)rvk_hi * {BLOCK} : {n};\n")
    else:
        start, end, span = "0", str(n), ""
    portable = f"    for (long i = {start}; i < {end}; ++i) {{\n{body}\n    }}"
    code = (f"    {voids}\n" if voids else "") + span + \
        guarded(_rvv(start, end, operands, out_dtype, y_q, relu, keep), portable)
    spec = make_spec("qdq_add", n_elems=n, operands=tuple(operands), out_dtype=out_dtype,
                     y_q=tuple(y_q), relu=int(relu), keep_float=int(keep))
    return Lowered(Kernel(f"qdq_add_{out_dtype}", params, code, support=header(), spec=spec,
                          split=Split(blocks, n * 16) if blocks > 1 else None))
