"""What the validate stage says when done: how many candidates passed, the tables of checks
with their counts (also recorded for the release's card), why nothing passed and what to try,
and what a model that could not be asked takes."""

from __future__ import annotations

from collections.abc import Sequence
from textwrap import shorten

from cuqa_builder.refresh import STALE
from cuqa_builder.run import CheckCount, RunContext
from cuqa_builder.validation.checks import CHECK_NAMES, CheckReport
from cuqa_builder.validation.connected import CHECKER_ERROR
from cuqa_builder.validation.critic import CRITIC_ERROR
from cuqa_builder.validation.probes import PROBE_ERROR
from cuqa_builder.verification.checker import UNREADABLE


def not_asked(ctx: RunContext) -> str:
    if ctx.options.checks.check_model == "none":
        return "checker: not asked (--check-model none turned its four checks off)"
    return "checker: not asked (this run has no generator to default to: give --check-model)"


def check_counts(
    report: CheckReport, names: Sequence[str], extra: list[tuple[str, Sequence[str]]]
) -> dict[str, CheckCount]:
    """Every check of the summary's tables with its counts, for the release's card; then each
    model that could not be asked about some candidates."""
    counts = {name: CheckCount(passed=report.applied[name] - report.failed[name],
                               failed=report.failed[name])
              for name in [*names, *(name for _, more in extra for name in more)]}
    counts.update({name: CheckCount(passed=None, failed=report.failed[name])
                   for name in (CHECKER_ERROR, PROBE_ERROR, CRITIC_ERROR) if report.failed[name]})
    return counts


def _count_table(report: CheckReport, names: Sequence[str]) -> list[str]:
    width = max(len(name) for name in names)
    lines = [f"  {'check':<{width}}  {'passed':>7}  {'failed':>7}"]
    for name in names:
        applied, failed = report.applied[name], report.failed[name]
        lines.append(f"  {name:<{width}}  {applied - failed:>7}  {failed:>7}")
    return lines


_EXAMPLE_CHARS = 100  # of a failure reason quoted when nothing passed


def _nothing_passed(report: CheckReport, shown: Sequence[str], known_source: str | None) -> str:
    """Why no candidate passed, by the check most of them failed (of equal ones, the first in
    the summary's tables, `shown`), and what to try."""
    order = {name: i for i, name in enumerate(shown)}
    check = min(report.failed, key=lambda name: (-report.failed[name], order.get(name, len(order))))
    count = report.failed[check]
    example = next(f.reason for v in report.validations for f in v.failures if f.check == check)
    if check == UNREADABLE:  # the checker wrote what could not be read, not the generator
        tries = ["another --check-model (one that answers in the shape its prompt asks for; "
                 "each reply is quoted in its failure)", "a larger --limit"]
    else:
        tries = ["a stronger --model",
                 *(["--known-source wiki"] if known_source != "wiki" else []),
                 "a larger --limit"]
    return (f"  nothing passed, most commonly {check} ({count} of {len(report.validations)}; "
            f"{shorten(example, _EXAMPLE_CHARS, placeholder='…')}): try {', '.join(tries)}")


def format_check_names(report: CheckReport) -> tuple[str, ...]:
    return (*CHECK_NAMES, STALE) if report.applied[STALE] else CHECK_NAMES


def summary_of(
    report: CheckReport, passed: int, dataset: str, extra: list[tuple[str, Sequence[str]]],
    yield_lines: list[str], known_source: str | None,
) -> str:
    total = len(report.validations)
    names = format_check_names(report)
    lines = [f"validate: {passed} of {total} candidates passed, {total - passed} failed {dataset}"]
    # First: a model that could not be asked explains the rest.
    lines += [f"  {who} could not be asked about {n} candidates (they fail {check}): "
              f"{ask_again(report, [who])}" for (check, who), n in report.unasked.items()]
    if unreadable := report.failed[UNREADABLE]:
        lines.append(f"  the checker's replies about {unreadable} candidates could not be read "
                     f"(they fail {UNREADABLE}: nothing was measured; each reply is quoted in "
                     "its failure)")
    if total and not passed and not report.failed[CHECKER_ERROR]:
        shown = [*names, *(name for _, more in extra for name in more)]
        lines.append(_nothing_passed(report, shown, known_source))
    lines += _count_table(report, names)
    for headline, more in extra:
        lines += [headline, *(_count_table(report, more) if more else [])]
    return "\n".join([*lines, *yield_lines])


def ask_again(report: CheckReport, whom: Sequence[str]) -> str:
    """What asking those models again takes: a batch call that failed in every round
    --max-retries allows is asked again only with a larger one."""
    if report.given_up.isdisjoint(whom):
        return "run validate again once it answers"
    return ("run validate again once it answers, with a larger --max-retries (its batch calls "
            "failed in every round the last one allowed)")
