"""The one parent of every error a user can meet: the CLIs show it as one line, no traceback.

Each error also keeps the built-in type it always had (ValueError, RuntimeError...) so code that
catches those still does. An error outside this family is a bug and keeps its traceback under -v.
"""

from __future__ import annotations

from pydantic import ValidationError


class CuqaError(Exception):
    """A failure the user can act on; its message says what to do. Exit status 1."""

    exit_code = 1


class UsageError(CuqaError, ValueError):
    """The command line is at fault: a flag or argument missing or malformed, flags refused
    together, or a flag refused against what the run directory records (its cutoff, seed,
    recipe). Exit status 2, like argparse's own usage errors; any other problem is 1."""

    exit_code = 2


class Paused(CuqaError):
    """Not a failure: the run stopped where it can go on later, once something outside it is
    done (an offline engine answering a batch file). The message says what to run. Exit status
    75 (EX_TEMPFAIL of sysexits.h: "try again later"), so a script can tell it from an error."""

    exit_code = 75


def describe_validation_error(exc: ValidationError, shown: int = 3) -> str:
    """One line naming each failing field: `revid: a revision id is 1 or more, not 0 (...);
    timestamp: Field required` (pydantic's own text spans several lines and hides the field in
    its layout; a validator's message is given without pydantic's "Value error, ")."""
    problems = [
        (f"{'.'.join(map(str, error['loc']))}: " if error["loc"] else "")
        + error["msg"].removeprefix("Value error, ")  # a validator's own words
        for error in exc.errors()[:shown]
    ]
    more = exc.error_count() - len(problems)
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")
