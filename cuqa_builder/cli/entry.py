"""The console scripts' entry points, light on purpose: each catches Ctrl-C before it imports its
command, so an interrupt while pydantic, openai and spaCy load (a second or more on a busy
machine) ends as one later does: one line and exit status 130, not a traceback.

Only the standard library is imported here; `shell.run_command` takes over once the command's
module is loaded.
"""

from __future__ import annotations

import importlib
import sys

INTERRUPTED = 130


def say_interrupted(prog: str) -> int:
    """The one answer to Ctrl-C of every command; returns its exit status."""
    print(f"\n{prog}: interrupted; run the same command to resume", file=sys.stderr)
    return INTERRUPTED


def _enter(prog: str, module: str) -> int:
    try:
        return importlib.import_module(module).main()
    except KeyboardInterrupt:  # before `run_command` handles it: while importing or parsing
        return say_interrupted(prog)


def build() -> int:
    return _enter("cuqa-build", "cuqa_builder.cli.build")


def evaluate() -> int:
    return _enter("cuqa-eval", "cuqa_builder.cli.evaluate")


def annotate() -> int:
    return _enter("cuqa-annotate", "cuqa_builder.cli.annotate")


def models() -> int:
    return _enter("cuqa-models", "cuqa_builder.cli.models")
