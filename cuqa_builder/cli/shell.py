"""The one shell around every command: logging, quiet HTTP loggers, errors and Ctrl-C.

Every CLI (`cuqa-build`, `cuqa-eval`, `cuqa-annotate`, `cuqa-models`) runs its work through
`run_command`, so all four answer alike:
- a bad flag: argparse's usage and `PROG: error: ...`, exit 2 (a `UsageError` too);
- any other failure the user can act on: one line `PROG: error: ...`, exit 1;
- Ctrl-C: `PROG: interrupted; run the same command to resume`, exit 130;
- a planned stop (`Paused`: batch files written for an offline engine): `PROG: ...` with what
  to run before the same command again, exit 75;
- `-v/--verbose`: debug logging, and the traceback above the one-line error.
"""

from __future__ import annotations

import argparse
import difflib
import gc
import logging
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from cuqa_builder.cli import say_interrupted
from cuqa_builder.errors import CuqaError, Paused

# Libraries that log every request or step at INFO, which would drown progress bars and summaries
# (httpx and httpx2: the openai client's HTTP stack; bm25s: its indexing steps).
_CHATTY_LOGGERS = ("httpx", "httpx2", "bm25s")
# A full garbage collection scans every live object, and a large run holds many (tens of
# thousands of items in flight, spaCy's pipeline): at Python's default (a full one after 10 of
# generation 1) they took a quarter of a batch run's CPU; a tenth as many cost no more memory.
_FULL_COLLECTION_AFTER = 100


class CommandParser(argparse.ArgumentParser):
    """Every command's parser (its subcommands' too: argparse makes them of the parser's
    class): a flag is taken only as spelled in full. argparse's default takes any unique
    abbreviation, so `--cutof 2023-04` passed as `--cutoff`, and a flag added later would
    change what an old abbreviation means."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # A misspelt flag is named first, with the nearest one: argparse would first complain
        # of a required flag (`--out is required` for `--cutof 2023-04`), then of "unrecognized
        # arguments" with no hint (its own hint, `suggest_on_error`, needs Python 3.14).
        given = list(sys.argv[1:] if args is None else args)
        known = _option_strings(self)
        for word in given:
            if word == "--":
                break
            flag = word.split("=", 1)[0]
            if flag.startswith("--") and len(flag) > 2 and flag not in known:
                near = difflib.get_close_matches(flag, sorted(known), n=1, cutoff=0.6)
                self.error(f"unrecognized argument: {flag}"
                           + (f" (did you mean {near[0]}?)" if near else ""))
        return super().parse_known_args(given, namespace)


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """The flags of `parser` and of its subcommands: a flag after a subcommand's name is the
    subcommand's, which checks it against its own when it parses."""
    known: set[str] = set()
    for action in parser._actions:  # argparse keeps no public list of its actions
        known.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                known |= _option_strings(sub)
    return known


def add_verbosity_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="debug logging, and tracebacks for errors")


def configure_logging(verbose: bool, quiet: bool = False) -> None:
    """Debug with -v; with -q (no progress bars) no INFO lines either: warnings and errors."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    for name in _CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.WARNING)


def run_command(
    prog: str, args: argparse.Namespace, command: Callable[[argparse.Namespace], int | None]
) -> int:
    """Run `command(args)` and turn its outcome into an exit status and at most one line."""
    verbose = bool(getattr(args, "verbose", False))
    configure_logging(verbose, quiet=bool(getattr(args, "quiet", False)))
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _FULL_COLLECTION_AFTER)
    try:
        status = command(args) or 0
        # The last write (a summary into a pipe is only buffered so far) happens here, where a
        # Ctrl-C is answered, not at exit with a traceback.
        sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        return say_interrupted(prog)
    except Paused as pause:  # not an error: its message (several lines) says what to run
        print(f"{prog}: {pause}", file=sys.stderr)
        return pause.exit_code
    except Exception as exc:  # every failure ends as one readable line, never a traceback
        if verbose:
            traceback.print_exc()
        print(f"{prog}: error: {_one_line(exc)}", file=sys.stderr)
        return exc.exit_code if isinstance(exc, CuqaError) else 1


def _one_line(exc: Exception) -> str:
    """The message of a user-facing error; for anything else also its kind and where to look,
    since it is most likely a bug."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, (CuqaError, OSError, ValueError)):
        return message
    return f"{message} ({type(exc).__name__}; run with -v for the traceback)"
