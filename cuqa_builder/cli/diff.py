"""`cuqa-build diff OLD NEW`: compare two releases by item id (see `release_diff.py`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cuqa_builder.cli.shell import CommandParser, add_verbosity_flags, run_command

PROG = "cuqa-build diff"


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=PROG,
        description="Compare two CuQA releases by item id: added, removed and changed items "
        "(question, answer, review), by cutoff, event month, type and difficulty. Writes "
        "NEW/CHANGELOG.md, records the comparison in NEW/stats.json and adds a section to "
        "NEW's card.",
    )
    parser.add_argument("old", type=Path, metavar="OLD", help="the earlier release folder")
    parser.add_argument("new", type=Path, metavar="NEW", help="the later release folder")
    add_verbosity_flags(parser)
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)

    def diff(args: argparse.Namespace) -> int:
        from cuqa_builder.release_diff import diff_releases, summarize

        print(summarize(diff_releases(args.old, args.new), args.new))
        return 0

    return run_command(PROG, args, diff)
