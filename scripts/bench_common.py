"""What every benchmark beside this file shares: a `--tiny` run for the test suite.

The suite runs each benchmark at a tiny size (tests/test_benchmarks.py), so that none rots
unseen: a renamed option or a changed stage breaks the test, not the next person who measures.
A tiny run goes through every path of the full one; its figures mean nothing, so its targets are
reported but not judged.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

TINY = "--tiny"


def bench_arguments(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None = None, **tiny: Any
) -> argparse.Namespace:
    """The benchmark's arguments; with `--tiny`, `tiny` gives the defaults (a flag given on the
    command line still wins)."""
    parser.add_argument(TINY, action="store_true",
                        help="a tiny run for the test suite: every path, no target judged ("
                        + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in tiny.items())
                        + ")")
    given, _ = parser.parse_known_args(argv)
    if given.tiny:
        parser.set_defaults(**tiny)
    return parser.parse_args(argv)


def judged(met: bool, args: argparse.Namespace) -> int:
    """The exit status: 1 for a missed target, except in a tiny run (which says so)."""
    if args.tiny:
        print("tiny run: the targets above are not judged")
        return 0
    return 0 if met else 1
