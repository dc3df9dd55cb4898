"""The RVV path of the int8 GEMM core (qgemm.py): exact products as vwmacc.vx at e16/m1 in
register blocks of up to 14 int32 accumulators, with vectors along n or m, whichever fills
more lanes at the VLEN the code runs at."""
from __future__ import annotations

RV_BLOCKS = (14, 8, 7, 4, 2, 1)   # rows or columns per RVV register block: 7 fits
#                                  a 7 x 7 map (49 = 3 x 14 + 7), 8 powers of two


def _rvv_block(r: int, scalar, vec_load: str, store) -> str:
    """One RVV register block of `r` int32 m2 accumulators (14 of them and the int16 m1 operand
    fill 29 of the 32 registers): every product is one vwmacc.vx at e16/m1, the first k
    peeled into vwmul so that the block is entered at the k loop's own vtype (clang 16 then
    keeps vsetvli out of it). `scalar(i, k)` is block row i's scalar at k, `vec_load(k)` the
    shared int16 m1 vector, `store(i)` writes accumulator c{i}."""
    rows = range(r)
    first = "\n".join(f"            vint32m2_t c{i} = __riscv_vwmul_vx_i32m2(v, (int16_t){scalar(i, '0')}, vl);"
                      for i in rows)
    mac = "\n".join(f"                c{i} = __riscv_vwmacc_vx_i32m2(c{i}, (int16_t){scalar(i, 'k')}, v, vl);"
                    for i in rows)
    stores = "\n".join(f"            {store(i)};" for i in rows)
    return f"""            vint16m1_t v = {vec_load('0')};
{first}
            for (long k = 1; k < K; ++k) {{
                v = {vec_load('k')};
{mac}
            }}
{stores}"""


def _rvv_blocks(idx: str, count: str, body) -> str:
    """Blocks of RV_BLOCKS[0] along `idx`, then one each of the smaller sizes for the rest."""
    big = RV_BLOCKS[0]
    parts = [f"""        long {idx} = 0;
        for (; {idx} + {big} <= {count}; {idx} += {big}) {{
{body(big)}
        }}"""]
    for r in RV_BLOCKS[1:]:
        parts.append(f"""        if ({count} - {idx} >= {r}) {{
{body(r)}
            {idx} += {r};
        }}""")
    return "\n".join(parts)


def _rvv_n_path() -> str:
    """Vectors along n (B's rows, widened to int16 once), scalars from A's rows."""
    body = lambda r: _rvv_block(   # noqa: E731
        r, lambda i, k: f"A[(m0 + {i}) * lda + {k}]",
        lambda k: f"__riscv_vle16_v_i16m1(bw + {k} * N + n0, vl)",
        lambda i: f"__riscv_vse32_v_i32m2(C + (m0 + {i}) * ldc + n0, c{i}, vl)")
    return f"""    int16_t *__restrict bw = (int16_t *)scratch;
    for (long k = 0; k < K; ++k)
        for (long n = 0; n < N;) {{
            const size_t vl = __riscv_vsetvl_e16m2((size_t)(N - n));
            __riscv_vse16_v_i16m2(bw + k * N + n,
                                  __riscv_vsext_vf2_i16m2(__riscv_vle8_v_i8m1(B + k * ldb + n, vl),
                                                          vl), vl);
            n += (long)vl;
        }}
    for (long n0 = 0; n0 < N;) {{
        const size_t vl = __riscv_vsetvl_e16m1((size_t)(N - n0));
{_rvv_blocks("m0", "M", body)}
        n0 += (long)vl;
    }}"""


def _rvv_m_path() -> str:
    """Vectors along m (A's columns, read strided and widened in the loop), scalars from B's
    rows, C stored strided."""
    body = lambda r: _rvv_block(   # noqa: E731
        r, lambda i, k: f"B[{k} * ldb + n0 + {i}]",
        lambda k: (f"__riscv_vsext_vf2_i16m1(__riscv_vlse8_v_i8mf2(A + m0 * lda + {k}, "
                   f"(ptrdiff_t)lda, vl), vl)"),
        lambda i: f"__riscv_vsse32_v_i32m2(C + m0 * ldc + n0 + {i}, cs, c{i}, vl)")
    return f"""    const ptrdiff_t cs = (ptrdiff_t)(ldc * (long)sizeof(int32_t));
    for (long m0 = 0; m0 < M;) {{
        const size_t vl = __riscv_vsetvl_e16m1((size_t)(M - m0));
{_rvv_blocks("n0", "N", body)}
        m0 += (long)vl;
    }}"""


def rvv_body() -> str:
    """The statements of rvk_qgemm's body under RVV intrinsics."""
    return f"""    /* Exact int8 products cost one vwmacc.vx (int16 x int16 -> int32) each; the register
     * blocks are at e16/m1 so that VLEN's 32 registers, not LMUL, give the reuse (14 rows
     * share each vector operand). Vectors run along whichever of n and m fills more lanes:
     * along n, B is widened once and A's weights are the scalars; along m (small N, e.g.
     * a 7 x 7 feature map), A's columns are the vectors, which costs one more instruction
     * per 14 products (the widening in the loop), so it is taken only when it saves more. */
    const long v1 = (long)__riscv_vsetvlmax_e16m1();
    const long n_lanes = (N + v1 - 1) / v1 * v1 * M, m_lanes = (M + v1 - 1) / v1 * v1 * N;
    if (m_lanes * 16 < n_lanes * 15) {{
{_rvv_m_path()}
        return;
    }}
{_rvv_n_path()}"""
