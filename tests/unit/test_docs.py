"""Documentation generated from the code stays in step with it."""
from pathlib import Path

from rvvkit.ops.catalog import markdown

ROOT = Path(__file__).resolve().parents[2]


def test_operator_list_matches_the_table():
    doc = (ROOT / "docs" / "OPERATORS.md").read_text(encoding="utf-8")
    table = doc[doc.index("| operator |"):]
    assert table == markdown(), \
        "docs/OPERATORS.md is stale: regenerate with  python3 -m rvvkit ops --markdown --doc"
