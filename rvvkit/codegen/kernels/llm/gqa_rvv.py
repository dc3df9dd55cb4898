"""RVV form of GroupQueryAttention's attention (blocks.gqa): one token's query heads against the
`live` cached positions, the query heads that share a key/value head taken together, so each
key and value load serves all of them (Qwen2.5-0.5B: 7 query heads per key/value head).

Per chunk of at most CHUNK heads of a group (chunk accumulators at LMUL 2: 2 * CHUNK + 2 of
the 32 vector registers):
- scores along positions: per head dimension one strided load of the keys (the cache is
  [heads, positions, head dim], as onnxruntime's), one multiply-add per query head;
- softmax per head as vector passes: maximum and sum by reductions, e^x by vmath's
  polynomial, the probabilities scaled in place;
- P.V along the head dimension: per position one unit-stride load of the value row, one
  multiply-add per query head with its probability as the scalar.
Each score sums along the head dimension in order, the exponentials are summed in position
order (vfredosum: the order is the ISA's, not the core's) and each output element sums its
positions in order: gqa_host.py computes the host and CUDA forms so, bit for bit."""
from __future__ import annotations

from typing import Callable, List

from ...cfmt import flt, indent
from ...loops import loop
from ..math import vmath

CHUNK = 7   # query heads per pass


def chunks(group: int) -> List[int]:
    """Query heads per pass over a group's keys and values."""
    return [CHUNK] * (group // CHUNK) + ([group % CHUNK] if group % CHUNK else [])


def support() -> dict:
    return vmath.exp_support(4)


def _softmax(sc: str) -> str:
    """C: sc[0 .. live) to its softmax, in place."""
    return f"""{{
    size_t vl;
    vfloat32m1_t red = __riscv_vfmv_v_f_f32m1(-3.402823466e38f, 1);
    for (long t = 0; t < live; t += (long)vl) {{
        vl = __riscv_vsetvl_e32m4((size_t)(live - t));
        red = __riscv_vfredmax_vs_f32m4_f32m1(__riscv_vle32_v_f32m4({sc} + t, vl), red, vl);
    }}
    const float mx = __riscv_vfmv_f_s_f32m1_f32(red);
    red = __riscv_vfmv_v_f_f32m1(0.0f, 1);
    for (long t = 0; t < live; t += (long)vl) {{
        vl = __riscv_vsetvl_e32m4((size_t)(live - t));
        const vfloat32m4_t e = {vmath.exp_name(4)}(
            __riscv_vfsub_vf_f32m4(__riscv_vle32_v_f32m4({sc} + t, vl), mx, vl), vl);
        __riscv_vse32_v_f32m4({sc} + t, e, vl);
        red = __riscv_vfredosum_vs_f32m4_f32m1(e, red, vl);   /* in order: gqa_host.py */
    }}
    const float inv = 1.0f / __riscv_vfmv_f_s_f32m1_f32(red);
    for (long t = 0; t < live; t += (long)vl) {{
        vl = __riscv_vsetvl_e32m4((size_t)(live - t));
        __riscv_vse32_v_f32m4({sc} + t, __riscv_vfmul_vf_f32m4(
            __riscv_vle32_v_f32m4({sc} + t, vl), inv, vl), vl);
    }}
}}"""


def chunk_rows(first: int, n: int, heads: int, group: int, head: int, max_seq: int, row: str,
               rotate: Callable[[str, str], str]):
    """C (declarations, rotations): query head i of the chunk's input row qs<i>, its rotated
    row qr<i> and scores sc<i> in the workspace, its output row o<i>; qr<i> filled."""
    decl = "\n".join(
        f"const float *__restrict qs{i} = q + {row} * {heads * head} + "
        f"(g * {group} + {first + i}) * {head};\n"
        f"float *__restrict qr{i} = qr + {i * head}, *__restrict sc{i} = sc + {i * max_seq};\n"
        f"float *__restrict o{i} = out + {row} * {heads * head} + "
        f"(g * {group} + {first + i}) * {head};" for i in range(n))
    return decl, "\n".join(rotate(f"qr{i}", f"qs{i}") for i in range(n))


def by_group(chunk: Callable[[int, int], str], heads: int, group: int, head: int,
             max_seq: int) -> str:
    """C: a loop over the key/value heads g (kh, vh: theirs) running `chunk(first, n)` for
    each chunk of the query heads that share g."""
    parts, first = [], 0
    for n in chunks(group):
        parts.append(chunk(first, n))
        first += n
    body = (f"const float *__restrict kh = kd + g * {max_seq * head};\n"
            f"const float *__restrict vh = vd + g * {max_seq * head};\n" + "\n".join(parts))
    return loop("g", 0, heads // group, body, "long")


def _chunk(first: int, n: int, heads: int, group: int, head: int, max_seq: int, row: str,
           rotate: Callable[[str, str], str], scale: float) -> str:
    """C: query heads g * group + first .. + n - 1 of token `row`."""
    hs = range(n)
    decl, queries = chunk_rows(first, n, heads, group, head, max_seq, row, rotate)
    zeros = ", ".join(f"a{i} = __riscv_vfmv_v_f_f32m2(0.0f, vl)" for i in hs)
    macs = "\n".join(f"a{i} = __riscv_vfmacc_vf_f32m2(a{i}, qr{i}[d], kv, vl);" for i in hs)
    stores = "\n".join(f"__riscv_vse32_v_f32m2(sc{i} + t0, "
                       f"__riscv_vfmul_vf_f32m2(a{i}, {flt(scale)}, vl), vl);" for i in hs)
    pv = "\n".join(f"a{i} = __riscv_vfmacc_vf_f32m2(a{i}, sc{i}[t], vv, vl);" for i in hs)
    outs = "\n".join(f"__riscv_vse32_v_f32m2(o{i} + d0, a{i}, vl);" for i in hs)
    return f"""{{
{indent(decl)}
{indent(queries)}
    for (long t0 = 0; t0 < live; ) {{
        const size_t vl = __riscv_vsetvl_e32m2((size_t)(live - t0));
        vfloat32m2_t {zeros};
        for (long d = 0; d < {head}; ++d) {{
            const vfloat32m2_t kv = __riscv_vlse32_v_f32m2(kh + t0 * {head} + d, {4 * head}, vl);
{indent(macs, 3)}
        }}
{indent(stores, 2)}
        t0 += (long)vl;
    }}
{indent(chr(10).join(_softmax(f"sc{i}") for i in hs))}
    for (long d0 = 0; d0 < {head}; ) {{
        const size_t vl = __riscv_vsetvl_e32m2((size_t)({head} - d0));
        vfloat32m2_t {zeros};
        for (long t = 0; t < live; ++t) {{
            const vfloat32m2_t vv = __riscv_vle32_v_f32m2(vh + t * {head} + d0, vl);
{indent(pv, 3)}
        }}
{indent(outs, 2)}
        d0 += (long)vl;
    }}
}}"""


def attend(heads: int, group: int, head: int, max_seq: int, row: str,
           rotate: Callable[[str, str], str], scale: float) -> str:
    """C (RVV): every query head of token `row` at position `pos` against the `live` cached
    keys, by key/value head g. `rotate(dst, src)`: C copying (rotating) a query row into the
    workspace. Workspace: sc (CHUNK rows of max_seq scores), qr (CHUNK rows of head)."""
    return by_group(lambda first, n: _chunk(first, n, heads, group, head, max_seq, row,
                                            rotate, scale), heads, group, head, max_seq)
