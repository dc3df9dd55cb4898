"""How far a path's outputs are from the reference's, in numbers a person can act on.

  max abs error  max |out - ref| over all elements.
  max rel error  max |out - ref| / max(|ref|, 1e-6 * max|ref|): relative to each element, with
                 a floor so that elements near zero (after a ReLU, in a softmax tail) do not
                 turn float32 rounding noise into huge ratios.
  matched        max abs error <= atol + rtol * max|ref|, per output: one tolerance for the
                 whole tensor, scaled by its magnitude (logits of 1e4 get a looser bound than
                 probabilities of 1e-3). A float16 output's rtol is at least 4 ulps of
                 half (HALF_RTOL): the reference rounds to half after its operators, rvvkit
                 computes them in float32.
  argmax         for classifier-shaped outputs (N, C), (N, C, 1, 1) or (C,) with C >= 2: rows
                 whose argmax over the class axis agrees.
Non-finite values where the reference is finite count as an infinite error."""
from __future__ import annotations

from typing import Dict, Mapping, Optional

import numpy as np

REL_FLOOR = 1e-6
HALF_RTOL = 4 * 2.0 ** -10


def _rows_classes(shape) -> Optional[tuple]:
    """(rows, classes) when an output looks like class scores: one axis of >= 2 classes after
    the batch axis, all others of size 1 ((N, C), (N, C, 1, 1) from a conv head, (C,)); else
    None (feature maps)."""
    if not shape:
        return None
    rows, rest = (int(shape[0]), shape[1:]) if len(shape) > 1 else (1, shape)
    big = [int(d) for d in rest if d != 1]
    if len(big) != 1 or big[0] < 2:
        return None
    return rows, big[0]


def _finite(x: float) -> Optional[float]:
    """JSON has no inf/nan: None stands for them (the row's reason says which)."""
    return float(x) if np.isfinite(x) else None


def score_output(name: str, out: Optional[np.ndarray], ref: np.ndarray, *, rtol: float,
                 atol: float) -> Dict:
    ref = np.asarray(ref)
    doc: Dict = {"name": name, "max_abs_err": None, "max_rel_err": None, "tolerance": None,
                 "argmax": None, "matched": False, "problem": None}
    if out is None:
        return dict(doc, problem="output missing")
    out = np.asarray(out)
    if ref.dtype == np.float16:
        rtol = max(rtol, HALF_RTOL)
    if out.shape != ref.shape:
        return dict(doc, problem=f"shape {list(out.shape)}, reference {list(ref.shape)}")
    o, r = out.astype(np.float64), ref.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (o == r) | (np.isnan(o) & np.isnan(r))  # inf == inf; NaN where the model has NaN
        diff = np.where(same, 0.0, np.abs(o - r))
        diff[np.isnan(diff)] = np.inf
    finite_ref = np.abs(r[np.isfinite(r)])
    peak = float(finite_ref.max()) if finite_ref.size else 0.0
    floor = max(REL_FLOOR * peak, float(np.finfo(np.float32).tiny))
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / np.maximum(np.abs(np.nan_to_num(r)), floor)).max()) \
        if diff.size else 0.0
    tol = atol + rtol * peak
    doc.update(max_abs_err=_finite(max_abs), max_rel_err=_finite(max_rel), tolerance=tol,
               matched=max_abs <= tol)
    if not np.isfinite(max_abs):
        doc["problem"] = "non-finite values where the reference is finite"
    elif max_abs > tol:
        doc["problem"] = f"max abs error {max_abs:.3g} > tolerance {tol:.3g}"
    rc = _rows_classes(ref.shape)
    if rc is not None:
        got = np.argmax(out.reshape(rc), axis=-1)
        want = np.argmax(ref.reshape(rc), axis=-1)
        doc["argmax"] = {"matched": int((got == want).sum()), "rows": rc[0]}
    return doc


def score(outs: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray], *, rtol: float,
          atol: float) -> Dict:
    """Per-output scores and the overall figures of one path (worst over outputs)."""
    per = [score_output(n, outs.get(n), r, rtol=rtol, atol=atol) for n, r in ref.items()]
    bad = [p for p in per if not p["matched"]]
    abs_errs = [p["max_abs_err"] for p in per]
    rel_errs = [p["max_rel_err"] for p in per]
    argmax = [p["argmax"] for p in per if p["argmax"]]
    row: Dict = {
        "status": "mismatch" if bad else "ok",
        "reason": "; ".join(f"{p['name']}: {p['problem']}" for p in bad) or None,
        # None (non-finite or missing) is worse than any number.
        "max_abs_err": None if None in abs_errs else max(abs_errs, default=0.0),
        "max_rel_err": None if None in rel_errs else max(rel_errs, default=0.0),
        "argmax": {"matched": sum(a["matched"] for a in argmax),
                   "rows": sum(a["rows"] for a in argmax)} if argmax else None,
        "outputs": per,
    }
    return row
