"""Plain-text tables for the CLI (no dependency: users run this over SSH on small boards)."""
from __future__ import annotations

from typing import List, Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[object]],
          align: str = "") -> str:
    """A left/right aligned table; `align` holds 'l' or 'r' per column (default: numbers right)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def side(i: int, sample: str) -> str:
        if align:
            return align[i]
        return "r" if sample.replace(".", "", 1).replace("-", "", 1).replace("%", "").isdigit() \
            else "l"

    def fmt(row: List[str]) -> str:
        out = []
        for i, c in enumerate(row):
            s = side(i, cells[0][i] if cells else c)
            out.append(c.rjust(widths[i]) if s == "r" else c.ljust(widths[i]))
        return "  ".join(out).rstrip()

    lines = [fmt(list(headers)), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# ---------------------------------------------------------------------------------------------
# `rvvkit compare`

COMPARE_HEADERS = ["path", "status", "max abs err", "max rel err", "argmax", "latency ms",
                   "vs reference", "dyn. instructions"]


def _sci(x) -> str:
    return "-" if x is None else ("0" if x == 0 else f"{x:.2e}")


def _latency(ms, stat: str) -> str:
    if ms is None:
        return "-"
    # Medians are the norm; anything else (a runner's mean, one run) says so.
    text = f"{ms:.4f}" if ms < 1 else (f"{ms:.3f}" if ms < 100 else f"{ms:.1f}")
    return text + ("" if stat == "median" else f" ({stat})")


def _ratio(x) -> str:
    if not x:
        return "-"
    return f"{x:.0f}x" if x >= 100 else (f"{x:.1f}x" if x >= 10 else f"{x:.3g}x")


def compare_table(doc: dict) -> str:
    """The `rvvkit compare` report from Comparison.to_json(): a few lines of context, one
    table (the reference first, as the peer), then the reason for each path that did not
    match, failed or was skipped."""
    ref = doc["reference"]
    tol = doc["tolerance"]
    lines = [f"model {doc['model']} ({doc['macs'] / 1e6:.3g} M MACs), inputs "
             + ", ".join(f"{n} {'x'.join(map(str, i['shape']))}" for n, i in doc["inputs"].items()),
             f"reference: {ref['name']}" + (f"; {ref['note']}" if ref.get("note") else ""),
             f"match: max|out - ref| <= {tol['atol']:g} + {tol['rtol']:g} * max|ref|, "
             "per output", ""]
    body = [["reference", "-", "-", "-", "-", _latency(ref["latency_ms"], ref["latency_stat"]),
             "1.00x" if ref["latency_ms"] and ref["kind"] != "onnx" else "-", "-"]]
    for r in doc["rows"]:
        ran = r["status"] in ("ok", "mismatch")
        am = r.get("argmax")
        insns = r.get("dynamic_instructions")
        vs = r.get("vs_reference")
        body.append([r["path"], r["status"],
                     _sci(r.get("max_abs_err")) if ran else "-",
                     _sci(r.get("max_rel_err")) if ran else "-",
                     f"{am['matched']}/{am['rows']}" if am else "-",
                     _latency(r.get("latency_ms"), r.get("latency_stat", "median")),
                     _ratio(vs),
                     f"{insns:,}" if insns is not None else "-"])
    lines.append(table(COMPARE_HEADERS, body, align="llrrrrrr"))
    notes = [f"  {r['path']}: {r['status']}: {r['reason']}" for r in doc["rows"] if r["reason"]]
    if notes:
        lines += [""] + notes
    if any(r.get("emulated") and r.get("latency_ms") for r in doc["rows"]):
        lines += ["", "qemu latency is emulation speed, not a board's: compare RVV code by "
                  "dynamic instructions (per inference, start-up subtracted)."]
    if any(r.get("vs_reference") for r in doc["rows"]):
        lines.append("vs reference: path latency / reference latency (below 1: faster).")
    return "\n".join(lines)
