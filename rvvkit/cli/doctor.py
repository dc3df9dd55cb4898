"""`rvvkit doctor`: compilers, QEMU and GPU on this machine, or a board's."""
from __future__ import annotations

from .common import board


def cmd_doctor(args) -> int:
    from .. import doctor
    sections = doctor.board_report(args.on) if args.on else doctor.local_report()
    print(doctor.format_report(sections))
    return 0


def add_parser(sub) -> None:
    d = sub.add_parser("doctor", help="compilers, QEMU, GPU here; or a board's compiler, "
                       "RVV support, VLEN, cores and OS")
    d.add_argument("--on", type=board, metavar="ssh://BOARD",
                   help="report on this board instead")
    d.set_defaults(func=cmd_doctor, parser=d)
