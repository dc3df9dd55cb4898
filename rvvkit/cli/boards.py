"""`rvvkit boards clean [BOARD]`: empty the build cache that the JIT keeps on a board (compiled
runners and kernels under its work dir), on one board or on every board of the boards file."""
from __future__ import annotations

import sys
from typing import List

from ..errors import RvvkitError
from .common import UsageError, progress


def _targets(board: str) -> List[str]:
    """ssh://... addresses: the one named (a bare alias gets ssh://), else every table of the
    boards file."""
    from ..runtime import is_board
    from ..runtime.boards import boards_path
    if board:
        url = board if board.startswith("ssh://") else f"ssh://{board}"
        if not is_board(url):
            raise UsageError(f"not a board: {board!r} (expected ssh://[user@]host[:port] or an "
                             "alias of the boards file)")
        return [url]
    path = boards_path()
    names: List[str] = []
    if path.is_file():
        from ..resources import load_toml
        names = [k for k, v in load_toml(path, what="boards file").items()
                 if isinstance(v, dict)]
    if not names:
        raise UsageError(f"name a board (ssh://...): the boards file {path} lists none")
    return [f"ssh://{name}" for name in names]


def cmd_clean(args) -> int:
    from ..runtime import board_cache
    from ..runtime.boards import board_config
    from ..runtime.remote import Board
    failed = 0
    for url in _targets(args.board):
        try:
            board = Board(board_config(url))
            try:
                entries, kib = board_cache.clean(board)
            finally:
                board.close()
        except RvvkitError as exc:  # report it and go on with the other boards
            print(f"rvvkit: error: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{board.label}: removed {entries} cache "
              f"{'entry' if entries == 1 else 'entries'} ({kib / 1024:.1f} MiB) from "
              f"{board.root}")
    if failed:
        progress(f"{failed} board{'s' if failed > 1 else ''} could not be cleaned")
    return 1 if failed else 0


def add_parser(sub) -> None:
    b = sub.add_parser("boards", help="manage boards: empty their build cache",
                       description="Manage the boards rvvkit runs on over SSH.")
    actions = b.add_subparsers(dest="action", required=True, metavar="ACTION")
    c = actions.add_parser(
        "clean", help="empty the build cache on a board",
        description="Empty the build cache on a board: the runners and kernels compiled there "
        "(runner-*/ and kernels-*/ under its work dir). They are rebuilt when next needed. "
        "Temporary dirs of running sessions are left alone. The cache is also kept under the "
        "board's cache_size option (default 256M) by removing least recently used entries. "
        "Exit status 0 when every board was cleaned, 1 when one could not be, 2 for bad "
        "usage.")
    c.add_argument("board", nargs="?", default="", metavar="BOARD",
                   help="ssh://[user@]host[:port] or a host alias (default: every board of "
                   "the boards file, $RVVKIT_BOARDS or ~/.config/rvvkit/boards.toml)")
    c.set_defaults(func=cmd_clean, parser=c)
    b.set_defaults(parser=b)
