"""The figures of a release's card (`stats.json`): its items counted by type, difficulty, month,
category, property and review status, the models and prompts that made them (each prompt's
cited source), how the candidates were composed, which checks ran, and the review report."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from datetime import date, timedelta

from pydantic import ValidationError

from cuqa_builder import __version__
from cuqa_builder.dataset_card import CheckRun, Composition, ReleaseStats, ReleaseWindow
from cuqa_builder.errors import describe_validation_error
from cuqa_builder.generation.yield_report import item_calls
from cuqa_builder.grounding.verdicts import BRIDGE, GROUNDING_CHECKS, KNOWN_HOP
from cuqa_builder.jsonio import iter_jsonl
from cuqa_builder.prompts import PromptError, load_prompt
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Event
from cuqa_builder.records.items import CuqaItem
from cuqa_builder.refresh import STALE
from cuqa_builder.review_report import ReviewReport
from cuqa_builder.run import (
    CANDIDATES,
    EVENTS,
    REVIEW_REPORT,
    RunContext,
    ValidationInfo,
    load_run_info,
)
from cuqa_builder.validation.checks import describe_checks
from cuqa_builder.validation.connected import CHECKER_ERROR
from cuqa_builder.validation.critic import CRITIC_ERROR, CRITIC_PREFIX
from cuqa_builder.validation.limits import Limits
from cuqa_builder.validation.probes import (
    DOES_NOT_COMPOSE,
    KNOWN_PART_NOT_KNOWN,
    NOT_UNKNOWN,
    PROBE_ERROR,
)
from cuqa_builder.validation.selection import MAX_SHARE, PER_EVENT
from cuqa_builder.verification.checker import (
    ANSWERED_WITH_EVENT,
    CALL_NAMES,
    CONNECTED,
    ONE_ANSWER,
    ONE_THING,
    UNKNOWN_BEFORE_CUTOFF,
)
from cuqa_builder.window import Window

# The checker's calls are recorded with an item's generation calls; they wrote none of it.
CHECKER_CALLS = frozenset(CALL_NAMES.values())

NO_CATEGORY = "(none)"  # year-article events carry no portal category
NO_PROPERTY = "(not recorded)"  # the paper recipe asks no named property


def _categories(ctx: RunContext, items: list[CuqaItem]) -> dict[str, str]:
    """Event id -> portal category, for the items' events (from the run's events.jsonl)."""
    wanted = {item.event.id for item in items}
    return {
        event.id: event.category or NO_CATEGORY
        for event in iter_jsonl(ctx.path(EVENTS), Event)
        if event.id in wanted
    }


def _released_candidates(ctx: RunContext, items: list[CuqaItem]) -> list[Candidate] | None:
    """The candidates of the released items (None: the run has no candidates.jsonl)."""
    path = ctx.path(CANDIDATES)
    if not path.exists():
        return None
    released = {item.id for item in items}
    return [c for c in iter_jsonl(path, Candidate) if c.id in released]


def _failed_automatic_checks(candidates: list[Candidate]) -> int:
    """How many released items failed validation: reviewers can accept those (`--only all`)."""
    return sum(1 for c in candidates if c.validation is not None and not c.validation.passed)


def _written_by_model(candidate: Candidate) -> bool:
    """Whether a generation call of the recipe gave the item's text (an accepted one: a
    refused try was replaced). Composed from structure, an item has none."""
    return any(call.function not in CHECKER_CALLS and call.rejected is None
               for call in item_calls(candidate)) or any(map(_written_by_model,
                                                             candidate.sub_items))


def _composition(candidates: list[Candidate]) -> Composition:
    by_model = [c for c in candidates if _written_by_model(c)]
    return Composition(by_model=len(by_model), from_structure=len(candidates) - len(by_model),
                       models=sorted({c.generator.model for c in by_model}))


def _model_check_summaries(guesses: int | None) -> dict[str, str]:
    """What the checks other than the format checks (`validation/checks.py`) require."""
    counted = f"the first {guesses}" if guesses else "the counted"
    return {
        STALE: "the event's text unchanged since the item was made",
        BRIDGE: "the bridge entity had a Wikipedia article at the cutoff",
        KNOWN_HOP: "the known sub-question's answer found in that article (or the known "
                   "answer's) as of the cutoff, with the evidence sentences in `grounding`",
        CONNECTED: f"with the event masked, none of {counted} guesses of the checker model "
                   "names the answer (the known part alone does not give it)",
        UNKNOWN_BEFORE_CUTOFF: f"none of {counted} guesses at the whole question names the "
                               "answer, by a model that knows (or is told to know) nothing "
                               "after the cutoff",
        ANSWERED_WITH_EVENT: "given the event's text, the checker answers with the item's "
                             "answer",
        ONE_ANSWER: "given the event's text, the checker finds nothing else that fits",
        ONE_THING: "given the event's text, the checker finds nothing else in the whole world's "
                   "news of that month that the description fits, and its kind of event does "
                   "not recur many times a month",
        NOT_UNKNOWN: "the probe model, closed-book, does not already answer the question",
        KNOWN_PART_NOT_KNOWN: "the probe model answers the known sub-question",
        DOES_NOT_COMPOSE: "given the unknown part's answer, the probe model answers the "
                          "question",
        f"{CRITIC_PREFIX}natural_question": "the critic model finds the question natural",
        f"{CRITIC_PREFIX}one_clear_answer": "the critic model finds one clear answer",
        f"{CRITIC_PREFIX}both_hops_needed": "the critic model finds both hops needed",
        f"{CRITIC_PREFIX}known_answer_supported": "the critic model finds the known answer "
                                                  "supported",
        PER_EVENT: "among the first --per-event (default 2) of its event's items that passed, "
                   "ranked best first, each of another bridge and property: the run keeps a "
                   "few items an event, not every variant of one",
        MAX_SHARE: "its property (birthplace, capital...) is not over --max-share (default "
                   "40%) of the items, or it ranks above the items of that property that were "
                   "dropped (one item of each property is always kept)",
        CHECKER_ERROR: "candidates the checker could not be asked about (nothing measured: "
                       "each failed)",
        PROBE_ERROR: "candidates the probe model could not be asked about (each failed)",
        CRITIC_ERROR: "candidates the critic could not be asked about (each failed)",
    }


def _checks_run(info: ValidationInfo | None, grounded: bool) -> list[CheckRun]:
    """Every check validation ran, with what it requires and its counts over the run's
    candidates; a run validated before the counts were recorded gets the format checks' (and
    grounding's) requirements without figures."""
    limits = info.limits if info else Limits()
    requires = {**describe_checks(limits),
                **_model_check_summaries(info.guesses if info else None)}
    if info is not None and info.counts:
        return [CheckRun(name=name, requires=requires.get(name, name), passed=count.passed,
                         failed=count.failed) for name, count in info.counts.items()]
    names = [*describe_checks(limits), *(GROUNDING_CHECKS if grounded else ())]
    return [CheckRun(name=name, requires=requires[name]) for name in names]


def _review_report(ctx: RunContext) -> ReviewReport | None:
    path = ctx.path(REVIEW_REPORT)
    if not path.exists():
        return None
    try:
        return ReviewReport.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise ValueError(
            f"{path} is not a review report: {describe_validation_error(exc)}"
        ) from None


def counts_of(values: Iterable[str]) -> dict[str, int]:
    """Most frequent first, then alphabetical."""
    return dict(sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0])))


def release_window(window: Window) -> ReleaseWindow:
    return ReleaseWindow(
        cutoff=window.label,
        known_until=window.cutoff,
        first_unknown_day=window.cutoff + timedelta(days=1),
        until=window.until,
    )


def compute_stats(
    ctx: RunContext, name: str, items: list[CuqaItem], window: Window | None = None
) -> ReleaseStats:
    """The card's figures for `items`, released for `window` (default: the run's)."""
    categories = _categories(ctx, items)
    info = load_run_info(ctx.out)
    candidates = _released_candidates(ctx, items)
    prompts: dict[str, set[str]] = {}
    for item in items:
        for template, sha in item.generator.prompts.items():
            prompts.setdefault(template, set()).add(sha)
    released = date.today()
    return ReleaseStats(
        name=name,
        version=ctx.options.release.release_version or released.isoformat(),
        released=released,
        tool=f"cuqa-builder {__version__}",
        items=len(items),
        window=release_window(window or ctx.window),
        by_type=counts_of(item.type for item in items),
        by_difficulty=counts_of(item.difficulty for item in items),
        by_month=dict(sorted(Counter(f"{item.event.date:%Y-%m}" for item in items).items())),
        by_category=counts_of(categories.get(item.event.id, NO_CATEGORY) for item in items),
        by_property=counts_of(item.property or NO_PROPERTY for item in items),
        by_review_status=counts_of(item.review.status for item in items),
        generator_models=sorted({item.generator.model for item in items}),
        composed=None if candidates is None else _composition(candidates),
        recipes=sorted({item.generator.recipe for item in items}),
        prompts={template: sorted(hashes) for template, hashes in sorted(prompts.items())},
        seed=info.seed,
        validation=info.validation,
        probe_model_check=info.probe_model_check,
        checks_run=_checks_run(info.validation, any(item.grounding for item in items)),
        source_pages=dict(sorted({i.event.source_title: i.event.revid for i in items}.items())),
        failed_automatic_checks=None if candidates is None else _failed_automatic_checks(
            candidates),
        review=_review_report(ctx),
    )


def prompt_sources(stats: ReleaseStats) -> dict[str, str]:
    """Each template's cited source, when the installed file is the one that was used."""
    return {name: _prompt_source(name, hashes) for name, hashes in stats.prompts.items()}


def _prompt_source(template: str, hashes: list[str]) -> str:
    try:
        prompt = load_prompt(template)
    except PromptError:
        return ""
    if prompt.sha256 not in hashes:
        return "(the installed template differs)"
    return re.sub(r"^source:\s*", "", prompt.source.splitlines()[0]) if prompt.source else ""
