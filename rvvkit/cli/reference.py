"""The CLI reference as Markdown, from the argument parsers themselves (the docs site builds
its command-line page from it): every command's `--help`, in `rvvkit --help` order."""
from __future__ import annotations

import argparse
import os
from typing import Iterator, Tuple

from . import build_parser

# Help is wrapped to the terminal's width; fixing it keeps the page the same on every machine.
WIDTH = "100"


def _commands(parser: argparse.ArgumentParser) -> Iterator[Tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of every subcommand and nested subcommand, depth first."""
    for action in parser._actions:                       # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                for nested, subsub in _commands(sub):
                    yield f"{name} {nested}", subsub


def _help(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return parser.format_help().rstrip()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def markdown() -> str:
    parser = build_parser()
    parts = ["## rvvkit", "", "```text", _help(parser), "```", ""]
    for name, sub in _commands(parser):
        parts += [f"## rvvkit {name}", "", "```text", _help(sub), "```", ""]
    return "\n".join(parts)
