"""`rvvkit compare --plot`: the comparison as a PNG, two panels side by side: latency per path
(the reference first, log scale, bars labelled in ms) and max abs error per path (log scale,
with the tolerance). Skipped and failed paths keep their place as hatched, empty bars that say
why. matplotlib is optional (rvvkit[bench]) and imported only here, with the Agg canvas, so no
display is needed and pyplot's global state is never touched."""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from ..errors import RvvkitError

COLOURS = {"ok": "#3b8f5c", "mismatch": "#c8413b", "reference": "#7c8798",
           "skipped": "#9aa0a6", "failed": "#c8413b"}
REASON_CHARS = 70


def _limits(values: List[float], pad_hi: float) -> Tuple[float, float]:
    vals = [v for v in values if v and v > 0]
    if not vals:
        return 1e-3, 1.0
    return min(vals) / 4, max(vals) * pad_hi


def _macs(n: float) -> str:
    return f"{n / 1e9:.3g} G MACs" if n >= 1e9 else f"{n / 1e6:.3g} M MACs"


def _short(text: Optional[str]) -> str:
    text = (text or "").replace("\n", " ")
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 1] + "…"


def _absent(ax, y: int, lo: float, hi: float, row: Dict) -> None:
    """A hatched, empty bar across the panel, labelled with the reason the path has no value."""
    colour = COLOURS.get(row["status"], COLOURS["skipped"])
    ax.barh(y, hi - lo, left=lo, height=0.6, fill=False, hatch="///", edgecolor=colour,
            linewidth=0.8)
    ax.text(lo * 1.3, y, f"{row['status']}: {_short(row['reason'])}", va="center", ha="left",
            fontsize=7.5, color="#333333", clip_on=True,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.5})


def _latency_panel(ax, doc: Dict) -> None:
    ref = doc["reference"]
    rows = [dict(path=f"reference\n{ref['name'].split(' (')[0]}", status="reference",
                 latency_ms=ref["latency_ms"], reason="no timing")] + doc["rows"]
    lo, hi = _limits([r.get("latency_ms") for r in rows], pad_hi=80)  # room for the labels
    for y, r in enumerate(rows):
        ms = r.get("latency_ms")
        if not ms:
            _absent(ax, y, lo, hi, r)
            continue
        ax.barh(y, ms - lo, left=lo, height=0.6, color=COLOURS.get(r["status"], "#4c72b0"))
        label = f"{ms:.3g} ms"
        if r.get("executor") == "qemu":
            label += " (emulated)"
            if r.get("dynamic_instructions"):
                label += f"\n{r['dynamic_instructions']:,} instructions"
        elif r["status"] == "reference" and ref["kind"] == "onnx":
            label += " (pure Python)"
        ax.text(ms * 1.12, y, label, va="center", ha="left", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["path"] for r in rows], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("latency per inference, ms (log scale; lower is better)")
    ax.set_title("latency", fontsize=11)


def _error_panel(ax, doc: Dict) -> None:
    rows = doc["rows"]
    tols = sorted({o["tolerance"] for r in rows for o in r.get("outputs", [])
                   if o.get("tolerance")})
    errs = [r.get("max_abs_err") for r in rows if r["status"] in ("ok", "mismatch")]
    lo, hi = _limits(errs + tols[:1], pad_hi=60)
    zero = lo * 2  # exact results have no place on a log axis: a stub, labelled "0"
    for y, r in enumerate(rows):
        err = r.get("max_abs_err")
        if r["status"] not in ("ok", "mismatch"):
            _absent(ax, y, lo, hi, r)
            continue
        if err is None:  # non-finite output
            err = hi / 2
        ax.barh(y, max(err, zero) - lo, left=lo, height=0.6, color=COLOURS[r["status"]])
        label = "0 (exact)" if err == 0 else f"{err:.2g}"
        if r["status"] == "mismatch":
            label += "  MISMATCH"
        ax.text(max(err, zero) * 1.15, y, label, va="center", ha="left", fontsize=8)
    if tols:
        ax.axvline(tols[0], color="#444444", linestyle="--", linewidth=1)
        ax.text(tols[0], -0.6, " tolerance" + (" (tightest output)" if len(tols) > 1 else ""),
                fontsize=7.5, ha="left", va="bottom", color="#444444")
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["path"] for r in rows], fontsize=9)
    ax.set_ylim(len(rows) - 0.5, -0.9)
    ax.set_xlabel("max abs error vs reference (log scale)")
    ax.set_title("numerics", fontsize=11)


def plot_comparison(doc: Dict, path: str) -> None:
    """Write the PNG for Comparison.to_json() `doc` to `path`, atomically (a temp file in the
    same directory, then os.replace: a crash never leaves half an image)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise RvvkitError("--plot needs matplotlib: pip install matplotlib "
                          "(or pip install 'rvvkit[bench]')") from None
    n = len(doc["rows"]) + 1
    fig = Figure(figsize=(13, 1.6 + 0.55 * n), dpi=110)
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.1, 1]})
    _latency_panel(left, doc)
    _error_panel(right, doc)
    ref = doc["reference"]
    fig.suptitle(f"{doc['model']} — {_macs(doc['macs'])} — reference: {ref['name']}",
                 fontsize=12, fontweight="bold")
    fig.text(0.5, 0.005, "green: matches the reference   red: mismatch   grey: the reference"
             "   hatched: did not run here (the reason is written in the bar)", ha="center",
             va="bottom", fontsize=8, color="#555555")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    tmp = f"{path}.{os.getpid()}.tmp.png"
    try:
        fig.savefig(tmp, format="png")
        os.replace(tmp, path)
    except OSError as exc:
        raise RvvkitError(f"cannot write plot {path}: {exc.strerror or exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
