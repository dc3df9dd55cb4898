"""`rvvkit ops`: the operators rvvkit supports, how each runs and on which element types."""
from __future__ import annotations

import json
import sys


def cmd_ops(args) -> int:
    from ..ops.catalog import catalog, markdown
    from ..report import table
    rows = catalog()
    if args.filter:
        rows = [r for r in rows if args.filter.lower() in r["op"].lower()]
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif args.markdown:
        sys.stdout.write(markdown())
    else:
        print(table(["operator", "runs as", "element types"],
                    [[r["op"], r["runs"], ", ".join(r["dtypes"]) or "-"] for r in rows]))
        print(f"\n{len(rows)} operators")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("ops", help="list the supported ONNX operators",
                       description="List the ONNX operators rvvkit supports: whether each runs "
                       "as a kernel or is folded at build time, and the element types its "
                       "kernel takes.")
    p.add_argument("filter", nargs="?", default="", help="show only ops whose name contains this")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON rows")
    fmt.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.set_defaults(func=cmd_ops, parser=p)
