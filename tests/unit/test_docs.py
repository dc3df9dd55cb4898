"""Documentation stays in step with the code: generated pages match their source, the README
stays short with working links, and the docs site builds with warnings as errors."""
import re
import subprocess
import sys
from pathlib import Path

from rvvkit.cli import build_parser
from rvvkit.cli.reference import _commands
from rvvkit.cli.reference import markdown as cli_markdown
from rvvkit.ops.catalog import markdown

ROOT = Path(__file__).resolve().parents[2]


def test_operator_list_matches_the_table():
    doc = (ROOT / "docs" / "OPERATORS.md").read_text(encoding="utf-8")
    table = doc[doc.index("| operator |"):]
    assert table == markdown(), \
        "docs/OPERATORS.md is stale: regenerate with  python3 -m rvvkit ops --markdown --doc"


def test_readme_fits_a_few_screens_and_its_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250, "the README is for a newcomer: move detail to docs/"
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == [], f"README links to files that do not exist: {missing}"


def test_cli_reference_covers_every_command_and_option():
    """The generated page holds each command's --help: every subcommand and option appears."""
    page = cli_markdown()
    for name, sub in _commands(build_parser()):
        assert f"## rvvkit {name}\n" in page
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in page, (name, flag)


def test_docs_site_builds_with_warnings_as_errors(tmp_path):
    """`mkdocs build --strict`: a broken link, a missing page or an unresolved API reference
    fails the build (mkdocs and mkdocstrings come with the dev extra)."""
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cli_page = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "rvvkit compare" in cli_page and "--require-signature" in cli_page
    api_page = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "rvvkit.load" in api_page and "UnsupportedOperator" in api_page
