"""ONNX node conformance pass rates: rvvkit (host executor) beside onnxruntime, on every case of
onnx.backend.test's node suite that is not out of scope by category
(rvvkit/conformance/suite.py EXCLUDED). Each case runs in a forked child, so a crash counts as
a failure and the run goes on.

    python3 benchmarks/conformance.py                  # the table
    python3 benchmarks/conformance.py --json           # the same as JSON
    python3 benchmarks/conformance.py --write-lists tests/host/conformance_lists.py
        # also regenerates the lists the tests check: NOT_YET (cases rvvkit fails today, with
        # why) and QEMU_SAMPLE (passing cases the QEMU/CUDA-emulator sample test runs)

Options: --jobs N (children at a time, default 2), --only REGEX (case names), --no-ort,
--from-json FILE (tables and lists from an earlier --json run).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time
from typing import Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rvvkit.conformance import suite as oc  # noqa: E402

SAMPLE_SIZE = 160          # passing cases in QEMU_SAMPLE
SAMPLE_MAX_ELEMENTS = 4096  # keep QEMU time small: no large tensors in the sample


# case-name prefixes that are not an op's name
NAME_ALIASES = {"sce": "SoftmaxCrossEntropyLoss", "nllloss": "NegativeLogLikelihoodLoss"}


def primary_op(name: str, model, op_names: Dict[str, str]) -> str:
    """The operator a case is about: its only node's, else the op its name starts with."""
    nodes = list(model.graph.node)
    if len(nodes) == 1:
        return nodes[0].op_type
    words = name[len("test_"):].split("_")
    if words[0] in NAME_ALIASES:
        return NAME_ALIASES[words[0]]
    for k in range(len(words), 0, -1):
        op = op_names.get("".join(words[:k]))
        if op:
            return op
    return nodes[0].op_type if nodes else "?"


def elements(case) -> int:
    inputs, outputs = case.data_sets[0]
    return sum(int(getattr(x, "size", 1)) for x in list(inputs) + list(outputs))


def measure(args) -> Dict:
    t0 = time.perf_counter()
    cases = oc.load_cases()
    op_names = {o.lower(): o for c in cases.values() for o in oc._ops(c.model)}
    rows: Dict[str, Dict] = {}
    excluded = collections.Counter()
    for name, case in sorted(cases.items()):
        if args.only and not re.search(args.only, name):
            continue
        cat = oc.excluded(name, case.model)
        if cat:
            excluded[cat] += 1
            continue
        rows[name] = {"class": oc.dtype_class(case.model),
                      "op": primary_op(name, case.model, op_names), "elements": elements(case)}
    print(f"{len(rows)} cases in scope, {sum(excluded.values())} excluded "
          f"({time.perf_counter() - t0:.0f} s to generate)", file=sys.stderr)
    runners = [("rvvkit", lambda c: (lambda: oc.run_rvvkit(c)))]
    if not args.no_ort:
        runners.append(("onnxruntime", lambda c: (lambda: oc.run_onnxruntime(c))))
    for who, make in runners:
        t1 = time.perf_counter()
        items = [(n, make(cases[n])) for n in rows]
        for i, (n, ok, why) in enumerate(oc.run_many(items, args.jobs, args.timeout)):
            rows[n][who] = ok
            if not ok:
                rows[n][who + "_why"] = why
            if (i + 1) % 100 == 0:
                print(f"  {who}: {i + 1}/{len(rows)}", file=sys.stderr)
        print(f"{who}: {time.perf_counter() - t1:.0f} s", file=sys.stderr)
    return {"cases": rows, "excluded": dict(excluded), "total": len(cases),
            "seconds": round(time.perf_counter() - t0, 1), "runners": [w for w, _ in runners]}


def summary(result: Dict) -> Dict:
    out: Dict = {}
    for who in result["runners"]:
        per = {}
        for cls in ("float32", "int/bool", "all"):
            rows = [r for r in result["cases"].values() if cls in ("all", r["class"])]
            passed = sum(bool(r.get(who)) for r in rows)
            per[cls] = {"passed": passed, "total": len(rows),
                        "percent": round(100.0 * passed / max(len(rows), 1), 1)}
        out[who] = per
    missing = collections.Counter(r["op"] for r in result["cases"].values()
                                  if not r.get("rvvkit"))
    out["top_missing_ops"] = missing.most_common(25)
    return out


def print_table(result: Dict, summ: Dict) -> None:
    print(f"ONNX node conformance: {result['total']} cases, "
          f"{sum(result['excluded'].values())} excluded by category, "
          f"{len(result['cases'])} in scope ({result['seconds']:.0f} s)")
    print(f"{'':10}" + "".join(f"{w:>26}" for w in result["runners"]))
    for cls in ("float32", "int/bool", "all"):
        cells = [summ[w][cls] for w in result["runners"]]
        print(f"{cls:10}" + "".join(f"{c['passed']:>12} / {c['total']:<5} {c['percent']:5.1f}%"
                                    for c in cells))
    print("excluded: " + ", ".join(f"{k} {v}" for k, v in sorted(result["excluded"].items())))
    print("top missing ops (failing cases): " +
          ", ".join(f"{op} {n}" for op, n in summ["top_missing_ops"]))


def write_lists(path: str, result: Dict) -> None:
    rows = result["cases"]
    failing = {n: r.get("rvvkit_why", "") for n, r in sorted(rows.items()) if not r.get("rvvkit")}
    by_op = collections.defaultdict(list)
    for n, r in sorted(rows.items(), key=lambda kv: (kv[1]["elements"], kv[0])):
        if r.get("rvvkit") and r["elements"] <= SAMPLE_MAX_ELEMENTS:
            by_op[r["op"]].append(n)
    sample: List[str] = []
    depth = 0
    while len(sample) < SAMPLE_SIZE and any(len(v) > depth for v in by_op.values()):
        sample += [v[depth] for _, v in sorted(by_op.items()) if len(v) > depth]
        depth += 1
    sample = sample[:SAMPLE_SIZE]  # the first round covers every op; the next is cut short
    lines = ['"""GENERATED: do not edit by hand. Regenerate with',
             "    python3 benchmarks/conformance.py --write-lists tests/host/conformance_lists.py",
             "NOT_YET: the in-scope ONNX node cases rvvkit fails today, with the first line of why",
             "(tests/host/test_onnx_backend.py checks each still fails, so remove a case when it",
             "passes: regenerate). QEMU_SAMPLE: small passing cases, a few per operator, that",
             'tests/qemu/test_conformance_sample.py runs on QEMU and the CUDA emulator."""', "",
             "NOT_YET = {"]
    for n, why in failing.items():  # the reason on its own line, cut to stay in 100 columns
        lines += [f"    {n!r}:", f"        {why[:84]!r},"]
    lines += ["}", "", "QEMU_SAMPLE = ["]
    lines += [f"    {n!r}," for n in sorted(sample)]
    lines += ["]", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {path}: {len(failing)} not yet, {len(sample)} in the sample", file=sys.stderr)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--write-lists", metavar="PATH", help="write NOT_YET and QEMU_SAMPLE")
    p.add_argument("--jobs", type=int, default=2, help="cases run at a time (default 2)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per case")
    p.add_argument("--only", metavar="REGEX", help="only cases whose name matches")
    p.add_argument("--no-ort", action="store_true", help="skip onnxruntime")
    p.add_argument("--from-json", metavar="FILE", help="take the results of an earlier --json "
                   "run instead of running the suite")
    args = p.parse_args()
    if args.write_lists and args.only:
        p.error("--write-lists needs the whole suite (no --only)")
    if args.from_json:
        with open(args.from_json) as f:
            result = json.load(f)
    else:
        result = measure(args)
    summ = summary(result)
    if args.json:
        json.dump({"summary": summ, **result}, sys.stdout, indent=1)
        print()
    else:
        print_table(result, summ)
    if args.write_lists:
        write_lists(args.write_lists, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
