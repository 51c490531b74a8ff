"""The command-line interfaces. Every console script loads this package before its entry point
(`entry.py`) can answer Ctrl-C, so it imports nothing but `sys`, loaded with the interpreter."""

import sys

INTERRUPTED = 130


def say_interrupted(prog: str) -> int:
    """The one answer to Ctrl-C of every command; returns its exit status."""
    print(f"\n{prog}: interrupted; run the same command to resume", file=sys.stderr)
    return INTERRUPTED
