"""MkDocs hook: the CLI reference page is generated from rvvkit's argument parsers at build
time, so it cannot drift from `rvvkit COMMAND --help`."""
from __future__ import annotations

MARKER = "<!-- rvvkit-cli-reference -->"


def on_page_markdown(markdown: str, page, **_kwargs) -> str:
    if MARKER not in markdown:
        return markdown
    from rvvkit.cli.reference import markdown as cli_markdown
    return markdown.replace(MARKER, cli_markdown())
