"""Det: the determinant of each trailing M x M matrix, by LU factorisation with partial
pivoting of a copy in the workspace (the sign flips with each row swap; a zero pivot column
gives 0). Rare and small in models: one plain loop nest, run by one thread on CUDA."""
from __future__ import annotations

import math

from ...kernel import Kernel, Lowered, Param, declare_spec, make_spec

declare_spec("det", ("x_shape",))


def det(x_shape) -> Lowered:
    """Params: x [..., M, M], y [...]."""
    xs = tuple(int(v) for v in x_shape)
    m, batch = xs[-1], math.prod(xs[:-2])
    loop = f"for (long b = 0; b < {batch}; ++b) {{" if batch > 1 else "{\n    const long b = 0;"
    body = f"""{loop}
    const float *__restrict xb = x + b * {m * m};
    for (long i = 0; i < {m * m}; ++i) ws[i] = xb[i];
    float d = 1.0f;
    for (long c = 0; c < {m}; ++c) {{
        long piv = c;
        for (long r = c + 1; r < {m}; ++r)
            if (fabsf(ws[r * {m} + c]) > fabsf(ws[piv * {m} + c])) piv = r;
        const float pv = ws[piv * {m} + c];
        if (pv == 0.0f) {{ d = 0.0f; break; }}
        if (piv != c) {{
            for (long j = 0; j < {m}; ++j) {{
                const float t = ws[c * {m} + j];
                ws[c * {m} + j] = ws[piv * {m} + j];
                ws[piv * {m} + j] = t;
            }}
            d = -d;
        }}
        d *= pv;
        for (long r = c + 1; r < {m}; ++r) {{
            const float f = ws[r * {m} + c] / pv;
            for (long j = c + 1; j < {m}; ++j) ws[r * {m} + j] -= f * ws[c * {m} + j];
        }}
    }}
    y[b] = d;
}}"""
    spec = make_spec("det", x_shape=xs)
    return Lowered(Kernel("det", (Param("x"), Param("y", False)),
                          "\n".join("    " + ln for ln in body.splitlines()) + "\n",
                          workspace=m * m, spec=spec))
