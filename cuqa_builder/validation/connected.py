"""The validate stage's side of the checker's four checks (`verification/checker.py`): ask them
of every candidate that passed the format checks, and record the verdicts with their evidence.

The connected recipe asked the same requests while composing, so with the generator as checker
they come from the cache; a hard item is checked through its two easy items (`connected`) and
as a whole (the other three). As while composing, an item whose answer a guess names is not
asked with the event: it fails either way, and the call would be paid for nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from cuqa_builder.llm.types import LLMError
from cuqa_builder.records.candidates import Candidate, CheckerVerdict, CheckFailure, Validation
from cuqa_builder.validation.checks import CheckReport
from cuqa_builder.validation.probes import Roles, ask_each, record_outcomes
from cuqa_builder.verification.checker import (
    CHECKER_CHECKS,
    ONE_THING,
    UNKNOWN_BEFORE_CUTOFF,
    UNREADABLE,
    ItemChecker,
    failure_check,
    failure_reason,
)

CHECKER_ERROR = "checker_error"


async def check_all(
    checker: ItemChecker, candidates: Sequence[Candidate], *, progress: bool = False
) -> list[list[CheckerVerdict] | LLMError]:
    async def verdicts(candidate: Candidate) -> list[CheckerVerdict]:
        return await verdicts_of(checker, candidate)

    return await ask_each(candidates, verdicts, "checker", progress)


async def verdicts_of(checker: ItemChecker, candidate: Candidate) -> list[CheckerVerdict]:
    """The four verdicts of one candidate: those given while composing when they are this
    checker's, else asked as while composing (the answer with the event only for an item no
    guess failed)."""
    if (given := composed_verdicts(candidate, checker)) is not None:
        return given
    return (await checker.check(candidate, fail_fast=True)).verdicts


def composed_verdicts(candidate: Candidate, checker: ItemChecker) -> list[CheckerVerdict] | None:
    """The verdicts the connected recipe's pooled checks gave while composing (the four, and
    `one_thing`, which only the pooled open book asks), when they are this checker's (the same
    models, the same number of guesses counted): validate takes them as they are. None:
    ask."""
    steps = candidate.intermediates
    given = steps.screening if steps is not None and candidate.difficulty == "easy" else []
    guesser = checker.guesser.model if checker.guesser is not None else checker.client.model
    wanted = {check: (guesser if check == UNKNOWN_BEFORE_CUTOFF else checker.client.model)
              for check in (*CHECKER_CHECKS, ONE_THING)}
    if not set(CHECKER_CHECKS) <= {v.check for v in given} or any(
            v.model != wanted[v.check] or (v.counted not in (None, checker.counted))
            for v in given):
        return None
    return list(given)


def record_checker(
    report: CheckReport, indexes: Sequence[int],
    outcomes: Sequence[list[CheckerVerdict] | LLMError], roles: Roles,
) -> None:
    """Store each item's verdicts; a failing verdict fails the item, with its reason. `roles`:
    the checker, and the model of the cutoff that guesses at the whole question if there is
    one."""

    def judge(validation: Validation, verdicts: list[CheckerVerdict]) -> list[CheckFailure]:
        validation.connected = verdicts
        report.applied.update({v.check for v in verdicts})
        failed = {v.check: CheckFailure(check=failure_check(v), reason=failure_reason(v))
                  for v in verdicts if not v.passed}
        report.applied[UNREADABLE] += 1  # every reply read: those that could not be fail
        return list(failed.values())

    record_outcomes(report, indexes, outcomes, roles=roles, error_check=CHECKER_ERROR,
                    judge=judge)
