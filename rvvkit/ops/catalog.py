"""What the operator table supports, as rows for people: `rvvkit ops` prints them and the
README's operator list is generated from them, so the documentation cannot drift from the
table."""
from __future__ import annotations

from typing import Dict, List

from .registry import FOLD_ONLY, REGISTRY


def catalog() -> List[Dict]:
    """One row per ONNX op (internal rvvkit.* ops left out), sorted by name: op, how it runs
    ("kernel", or the reason it never needs one), and the element types its kernel takes."""
    import rvvkit.codegen.lower  # noqa: F401  (attaches the C lowerings to the table)
    rows = []
    for name in sorted(REGISTRY):
        d = REGISTRY[name]
        if d.internal:
            continue
        if d.lower is not None:
            how = "kernel"
        elif d.without_kernel == FOLD_ONLY:
            how = "folded at build time"
        else:
            how = d.without_kernel or "no kernel"
        types = list(d.kernel_dtypes)
        rows.append({"op": name, "runs": how, "dtypes": types if d.lower else []})
    return rows


def markdown() -> str:
    """The catalog as a Markdown table."""
    lines = ["| operator | runs as | element types |", "|---|---|---|"]
    for r in catalog():
        lines.append(f"| {r['op']} | {r['runs']} | {', '.join(r['dtypes']) or '-'} |")
    return "\n".join(lines) + "\n"
