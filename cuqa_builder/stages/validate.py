"""The validate stage: `candidates.jsonl` -> verdicts on every candidate + `cuqa.jsonl`.

Every candidate keeps its verdict (`validation`: passed, failures with reasons, probe answers,
critic verdicts) and its `grounding` (verdicts with evidence, when the ground stage has stored
the articles) in `candidates.jsonl`, rewritten atomically; the ones that passed become the
unreviewed items of `cuqa.jsonl`. The checks are cheap and simply run again; probe and critic
calls go through the gateway's cache, so a killed or repeated run asks nothing twice. A
candidate whose event a refresh reworded or removed fails `event_changed` (and is not probed)
until the generate stage makes it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from textwrap import shorten
from typing import TYPE_CHECKING

from cuqa_builder.generation.yield_report import yield_lines
from cuqa_builder.grounding.verdicts import GROUNDING_CHECKS
from cuqa_builder.jsonio import iter_jsonl, read_jsonl, write_jsonl
from cuqa_builder.llm.settings import (
    resolve_settings,
)
from cuqa_builder.llm.types import GatewayStats
from cuqa_builder.review_report import ReviewReport

if TYPE_CHECKING:
    from cuqa_builder.llm.estimate import CallPlan
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records import (
    Candidate,
    CheckFailure,
    CuqaItem,
    Event,
    GenerationFailure,
    GroundingVerdict,
)
from cuqa_builder.refresh import STALE, stale_candidates
from cuqa_builder.run import (
    ARTICLES,
    CANDIDATES,
    DATASET,
    EVENTS,
    GENERATION_FAILURES,
    LLM_CACHE,
    REVIEW_REPORT,
    CheckCount,
    RunContext,
    Unfinished,
    ValidationInfo,
    check_replacement,
    load_run_info,
    save_run_info,
)
from cuqa_builder.stages.endpoints import model_settings, open_checker, probe_settings
from cuqa_builder.stages.options import BuildOptions
from cuqa_builder.validation.checks import CHECK_NAMES, CheckReport
from cuqa_builder.validation.checks import check_all as format_checks
from cuqa_builder.validation.connected import CHECKER_ERROR, check_all, record_checker
from cuqa_builder.validation.critic import (
    CRITIC_CHECKS,
    CRITIC_ERROR,
    CRITIC_TEMPLATE,
    Critic,
    criticise_all,
    record_critic,
)
from cuqa_builder.validation.probes import (
    CLOSED_BOOK,
    PROBE_CHECKS,
    PROBE_ERROR,
    PROBE_SAMPLING,
    WITH_UNKNOWN_ANSWER,
    Prober,
    probe_all,
    record_probes,
)
from cuqa_builder.verification.checker import (
    CHECKER_CHECKS,
    CHECKER_TEMPLATES,
    GUESS_SAMPLING,
    GUESS_TEMPLATE,
    OPEN_BOOK_SAMPLING,
    OPEN_BOOK_TEMPLATE,
    cutoff_phrase,
)
from cuqa_builder.verification.masking import masked_question


async def _probe(
    options: BuildOptions, cache: Path, candidates: Sequence[Candidate], report: CheckReport
) -> tuple[str, str, GatewayStats]:
    """Probe the candidates that passed the checks; returns the model, judge and usage."""
    # Imported here: `openai` takes a while to load and only probing needs it.
    from cuqa_builder.llm.gateway import open_gateway

    indexes = [i for i, v in enumerate(report.validations) if v.passed]
    probe, judging = probe_settings(options, cache)
    async with AsyncExitStack() as stack:
        gateway = await stack.enter_async_context(open_gateway(probe))
        judge_gateway = None
        if judging is not None:
            # The same model at the same endpoint: one gateway (one embedded server at most).
            judge_gateway = gateway if judging == probe else await stack.enter_async_context(
                open_gateway(judging)
            )
        prober = Prober(gateway, judge_gateway)
        outcomes = await probe_all(
            prober, [candidates[i] for i in indexes], progress=not options.quiet
        )
        record_probes(report, indexes, outcomes, gateway.model)
        return gateway.model, prober.judge_name, gateway.stats


# Probe answers are "just a few words"; the judge says Yes or No; the checker gives five short
# guesses, or three short lines.
PROBE_OUT_TOKENS, JUDGE_OUT_TOKENS = 8, 2
GUESS_OUT_TOKENS, OPEN_BOOK_OUT_TOKENS = 25, 20


def estimate(ctx: RunContext, planned_candidates: int = 0) -> list[CallPlan]:
    """The checker's calls and the probes' (and the judge's) for the candidates that pass the
    checks now, plus `planned_candidates` not generated yet."""
    candidates = read_jsonl(ctx.path(CANDIDATES), Candidate)
    report = format_checks(candidates, ctx.options.checks.limits)
    passed = [c for c, v in zip(candidates, report.validations, strict=True) if v.passed]
    plans = _probe_estimate(ctx, passed, planned_candidates)
    settings = resolve_settings(ctx.options.llm, default_cache=ctx.path(LLM_CACHE))
    generator = settings.model or settings.local
    model = checker_model(ctx, generator)
    if model is not None:
        # The generator as checker answered while composing: its answers are in the cache.
        composed = model == generator and not settings.uses_local_model
        plan = _checker_estimate(ctx, model, passed, 0 if composed else planned_candidates)
        if composed and planned_candidates:
            plan.notes.append(f"checker: the {planned_candidates} candidates not generated yet "
                              "are checked while composing (counted under generate)")
        plans.insert(0, plan)
    return plans


def _checker_estimate(
    ctx: RunContext, model: str, passed: list[Candidate], planned_candidates: int
) -> CallPlan:
    """The checker's calls: guesses at the masked question of each easy item (two per hard
    item) and at each item's whole question, and each item answered with its event. A judge
    call is made only where a guess and the answer share words without being the same name:
    not planned."""
    from cuqa_builder.llm.estimate import CallPlan, calibration

    settings = model_settings(ctx.options, ctx.path(LLM_CACHE), model,
                              ctx.options.checks.check_base_url)
    plan = CallPlan(model, calibration(settings, model), rounds=1)
    guess, open_book = load_prompt(GUESS_TEMPLATE), load_prompt(OPEN_BOOK_TEMPLATE)
    cutoff = cutoff_phrase(ctx.window.label)
    easy = [item for c in passed for item in (c.sub_items if c.difficulty == "hard" else [c])]
    typical = "x" * plan.calibration.chars(25)
    questions = [masked_question(item) for item in easy] + [c.question for c in passed]
    questions += [typical, typical] * planned_candidates
    for question in questions:
        plan.add("checker: guesses", len(guess.render(question=question, cutoff=cutoff)),
                 int(GUESS_SAMPLING["max_tokens"]), GUESS_OUT_TOKENS, template=GUESS_TEMPLATE)
    with_event = [(c.question, c.event.text, _passage(c)) for c in passed]
    with_event += [(typical, typical * 2, typical * 8)] * planned_candidates
    for question, event, passage in with_event:
        prompt = open_book.render(question=question, event=event, passage=passage, date="",
                                  cutoff=cutoff)
        plan.add("checker: with the event", len(prompt), int(OPEN_BOOK_SAMPLING["max_tokens"]),
                 OPEN_BOOK_OUT_TOKENS, template=OPEN_BOOK_TEMPLATE)
    if planned_candidates:
        plan.notes.append(f"checker: the {planned_candidates} candidates not generated yet "
                          "are assumed to pass the format checks")
    plan.notes.append("checker: a judge call where a guess shares words with the answer "
                      "without naming it is not planned")
    return plan


def _passage(candidate: Candidate) -> str:
    return " ".join(item.intermediates.known_passage for item in
                    (candidate.sub_items if candidate.difficulty == "hard" else [candidate])
                    if item.intermediates is not None)


def _probe_estimate(
    ctx: RunContext, passed: list[Candidate], planned_candidates: int
) -> list[CallPlan]:
    """The probes' calls (and the judge's); none without --probe-model."""
    from cuqa_builder.judge import DEFAULT_JUDGE_PROMPT, judge_prompt
    from cuqa_builder.llm.estimate import CallPlan, calibration

    options = ctx.options
    if not options.checks.probe_model:
        return []
    probe, judging = probe_settings(options, ctx.path(LLM_CACHE))
    probe_model = probe.model or probe.local or ""
    plan = CallPlan(probe_model, calibration(probe, probe_model), rounds=1)
    judge = None
    if judging is not None:
        judge_model = judging.model or judging.local or ""
        judge = plan if judge_model == probe_model else CallPlan(
            judge_model, calibration(judging, judge_model))
        judge.rounds = 2
    asked = [([c.question, *(s.question for s in c.sub_questions if s.kind == "known")],
              "\n".join(f"{s.question} {s.answer}." for s in c.sub_questions
                        if s.kind == "unknown"))
             for c in passed]
    if planned_candidates:
        typical = "x" * plan.calibration.chars(30)
        asked += [([typical, typical], typical)] * planned_candidates
        plan.notes.append(f"probes: the {planned_candidates} candidates not generated yet are "
                          "assumed to pass the checks, with one known sub-question each")
    closed, given = load_prompt(CLOSED_BOOK), load_prompt(WITH_UNKNOWN_ANSWER)
    chosen = judge_prompt(DEFAULT_JUDGE_PROMPT)  # the one the probes' judge uses
    judge_template = load_prompt(chosen.template)
    answer = "x" * plan.calibration.chars(PROBE_OUT_TOKENS)
    for questions, facts in asked:
        prompts = [("closed book", closed.render(question=q)) for q in questions]
        prompts.append(("with the unknown part",
                        given.render(question=questions[0], passage=facts)))
        for step, prompt in prompts:
            plan.add(f"probe: {step}", len(prompt), int(PROBE_SAMPLING["max_tokens"]),
                     PROBE_OUT_TOKENS, template=CLOSED_BOOK if step == "closed book"
                     else WITH_UNKNOWN_ANSWER)
            if judge is not None:
                values = {"question": questions[0], "prediction": answer,
                          chosen.answers_slot: answer}
                judge.add("judge", len(judge_template.render(**values)), 8, JUDGE_OUT_TOKENS,
                          template=chosen.template)
    return [plan] if judge is None or judge is plan else [plan, judge]


async def _criticise(
    options: BuildOptions, cache: Path, candidates: Sequence[Candidate], report: CheckReport
) -> str:
    """Ask the critic about the candidates that passed everything else; returns a summary."""
    from cuqa_builder.llm.gateway import open_gateway

    checks = options.checks
    assert checks.critic_model is not None
    indexes = [i for i, v in enumerate(report.validations) if v.passed]
    settings = model_settings(options, cache, checks.critic_model, checks.critic_base_url)
    async with open_gateway(settings) as gateway:
        outcomes = await criticise_all(
            Critic(gateway), [candidates[i] for i in indexes], progress=not options.quiet
        )
        record_critic(report, indexes, outcomes, gateway.model, advisory=checks.critic_advisory)
        mode = "advisory" if checks.critic_advisory else "failing items"
        return (f"critic: {len(indexes)} candidates judged by {gateway.model} ({mode}); "
                f"{gateway.stats.calls} calls, {gateway.stats.cache_hits} from the cache")


def checker_model(ctx: RunContext, planned: str | None = None) -> str | None:
    """The checker's model: --check-model, else the generator (recorded, or `planned` before
    generation ran); None: no checker (turned off, or nothing to default to)."""
    chosen = ctx.options.checks.check_model
    if chosen == "none":
        return None
    generation = load_run_info(ctx.out).generation
    return chosen or (generation.model if generation else planned)


def _not_asked(ctx: RunContext) -> str:
    if ctx.options.checks.check_model == "none":
        return "checker: not asked (--check-model none turned its four checks off)"
    return "checker: not asked (this run has no generator to default to: give --check-model)"


async def _ask_checker(
    ctx: RunContext, model: str, candidates: Sequence[Candidate], report: CheckReport
) -> str:
    """Ask the checker about the candidates that passed the checks so far; returns a summary.
    With --probe-model, that model (whose knowledge ends at the cutoff) makes the guesses at
    the whole question."""

    options = ctx.options
    indexes = [i for i, v in enumerate(report.validations) if v.passed]
    async with AsyncExitStack() as stack:
        checker, gateways = await open_checker(options, ctx.path(LLM_CACHE), ctx.window.label,
                                               model, stack)
        outcomes = await check_all(checker, [candidates[i] for i in indexes],
                                   progress=not options.quiet)
        gateway, guesser = gateways[0], checker.guesser
        record_checker(report, indexes, outcomes, gateway.model)
        calls = sum(g.stats.calls for g in gateways)
        hits = sum(g.stats.cache_hits for g in gateways)
        whole = (f"{guesser.model}, a model whose knowledge ends at the cutoff (--probe-model)"
                 if guesser is not None else
                 f"{gateway.model}, told to know nothing after {cutoff_phrase(ctx.window.label)}"
                 " (a model that knows later events errs towards failing: --probe-model for a "
                 "model of the cutoff)")
        return (f"checker: {len(indexes)} candidates asked by {gateway.model}; guesses counted: "
                f"the first {options.checks.guesses} of 5; the whole question guessed by "
                f"{whole}; {calls} calls, {hits} from the cache")


def _grounding(
    ctx: RunContext, candidates: Sequence[Candidate]
) -> tuple[list[list[GroundingVerdict]], str]:
    """Each candidate's grounding verdicts, from the articles the ground stage stored."""
    if not ctx.path(ARTICLES).exists():
        return [[] for _ in candidates], (
            f"grounding: not checked ({ctx.path(ARTICLES)} is missing: run --stage ground)"
        )
    # Imported here: the question analysis loads spaCy, which only grounding needs.
    from cuqa_builder.grounding.articles import open_article_store
    from cuqa_builder.grounding.verdicts import Grounder, spacy_analyser

    grounder = Grounder(open_article_store(ctx), ctx.window.cutoff,
                        spacy_analyser(ctx.options.source.spacy_model))
    grounder.prepare(candidates)
    verdicts = [grounder.verdicts(candidate) for candidate in candidates]
    return verdicts, f"grounding: against the articles at the end of {ctx.window.cutoff}"


def _grounding_failures(verdicts: list[GroundingVerdict]) -> list[CheckFailure]:
    return [CheckFailure(check=v.check, reason=f"{v.item}: {v.reason}" if v.item else v.reason)
            for v in verdicts if not v.passed]


def _check_counts(
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


def _mark_stale(ctx: RunContext, candidates: list[Candidate], report: CheckReport) -> None:
    """Fail the candidates whose event changed or went away since they were made (when the
    run has its events.jsonl to compare with)."""
    if not ctx.path(EVENTS).exists():
        return
    events = {event.id: event for event in iter_jsonl(ctx.path(EVENTS), Event)}
    stale = stale_candidates(candidates, events)
    report.applied[STALE] = len(candidates)
    for candidate, validation in zip(candidates, report.validations, strict=True):
        if candidate.id in stale:
            validation.failures.append(stale[candidate.id].failure())
            validation.passed = False
            report.failed[STALE] += 1


_EXAMPLE_CHARS = 100  # of a failure reason quoted when nothing passed


def _nothing_passed(report: CheckReport, shown: Sequence[str], known_source: str | None) -> str:
    """Why no candidate passed, by the check most of them failed (of equal ones, the first in
    the summary's tables, `shown`), and what to try."""
    order = {name: i for i, name in enumerate(shown)}
    check = min(report.failed, key=lambda name: (-report.failed[name], order.get(name, len(order))))
    count = report.failed[check]
    example = next(f.reason for v in report.validations for f in v.failures if f.check == check)
    tries = ["a stronger --model",
             *(["--known-source wiki"] if known_source != "wiki" else []),
             "a larger --limit"]
    return (f"  nothing passed, most commonly {check} ({count} of {len(report.validations)}; "
            f"{shorten(example, _EXAMPLE_CHARS, placeholder='…')}): try {', '.join(tries)}")


def _format_check_names(report: CheckReport) -> tuple[str, ...]:
    return (*CHECK_NAMES, STALE) if report.applied[STALE] else CHECK_NAMES


def _summary(
    report: CheckReport, passed: int, dataset: str, extra: list[tuple[str, Sequence[str]]],
    yield_lines: list[str], known_source: str | None,
) -> str:
    total = len(report.validations)
    names = _format_check_names(report)
    lines = [f"validate: {passed} of {total} candidates passed, {total - passed} failed {dataset}"]
    if errors := report.failed[CHECKER_ERROR]:  # first: it explains the rest
        lines.append(f"  the checker could not be asked about {errors} candidates (they fail "
                     f"{CHECKER_ERROR}): run validate again once it answers")
    if total and not passed and not report.failed[CHECKER_ERROR]:
        shown = [*names, *(name for _, more in extra for name in more)]
        lines.append(_nothing_passed(report, shown, known_source))
    lines += _count_table(report, names)
    for headline, more in extra:
        lines += [headline, *(_count_table(report, more) if more else [])]
    if errors := report.failed[PROBE_ERROR]:
        lines.append(f"  {errors} candidates could not be probed: run validate again")
    if errors := report.failed[CRITIC_ERROR]:
        lines.append(f"  {errors} candidates could not be judged by the critic: run again")
    return "\n".join([*lines, *yield_lines])


def run(ctx: RunContext) -> str:
    path = ctx.path(CANDIDATES)
    candidates = read_jsonl(path, Candidate)
    options = ctx.options
    limits = options.checks.limits
    grounding, grounding_line = _grounding(ctx, candidates)
    report = format_checks(candidates, limits, [_grounding_failures(v) for v in grounding])
    grounded = [v for verdicts in grounding for v in verdicts]
    report.applied.update(v.check for v in grounded)
    extra: list[tuple[str, Sequence[str]]] = [
        (grounding_line, GROUNDING_CHECKS if grounded else ())
    ]
    _mark_stale(ctx, candidates, report)
    settings = ValidationInfo(limits=limits)
    if model := checker_model(ctx):
        line = asyncio.run(_ask_checker(ctx, model, candidates, report))
        extra.append((line, CHECKER_CHECKS))
        settings = settings.model_copy(update={
            "check_model": model, "guesses": options.checks.guesses,
            "prompts": {name: load_prompt(name).sha256 for name in CHECKER_TEMPLATES},
        })
    else:
        extra.append((_not_asked(ctx), ()))
    if options.checks.probe_model:
        model, judge_name, stats = asyncio.run(
            _probe(options, ctx.path(LLM_CACHE), candidates, report)
        )
        probed = report.applied[PROBE_CHECKS[0]] + report.failed[PROBE_ERROR]
        extra.append((
            f"probes: {probed} candidates asked {model} (judge: {judge_name}); "
            f"{stats.calls} calls, {stats.cache_hits} from the cache", PROBE_CHECKS,
        ))
        prompts = {name: load_prompt(name).sha256 for name in (CLOSED_BOOK, WITH_UNKNOWN_ANSWER)}
        settings = settings.model_copy(update={
            "probe_model": model, "judge": judge_name,
            "prompts": {**(settings.prompts or {}), **prompts},
        })
    if options.checks.critic_model:
        line = asyncio.run(_criticise(options, ctx.path(LLM_CACHE), candidates, report))
        extra.append((line, CRITIC_CHECKS))
        prompts = {**(settings.prompts or {}), CRITIC_TEMPLATE: load_prompt(CRITIC_TEMPLATE).sha256}
        settings = settings.model_copy(update={"critic_model": options.checks.critic_model,
                                               "prompts": prompts})
    validated = [
        candidate.model_copy(update={"validation": validation, "grounding": verdicts})
        for candidate, validation, verdicts in zip(
            candidates, report.validations, grounding, strict=True)
    ]
    passed = [c.to_item() for c in validated if c.validation and c.validation.passed]
    # The dataset first: when it refuses to shrink, "nothing was written" must hold.
    dataset = _write_dataset(
        ctx.path(DATASET), ctx.path(REVIEW_REPORT), passed, options.force
    )
    write_jsonl(path, validated)
    counts = _check_counts(report, _format_check_names(report), extra)
    # what the release's card reports
    save_run_info(ctx.out, validation=settings.model_copy(update={"counts": counts}))
    failures = read_jsonl(ctx.path(GENERATION_FAILURES), GenerationFailure)
    generation = load_run_info(ctx.out).generation
    summary = _summary(report, len(passed), dataset, extra, yield_lines(validated, failures),
                       generation.known_source if generation else None)
    # The verdicts are written; a model that could not be asked leaves the run unfinished.
    unasked = [f"{whom} could not be asked about {n} candidates" for whom, n in (
        ("the checker", report.failed[CHECKER_ERROR]),
        ("the probe model", report.failed[PROBE_ERROR]),
        ("the critic", report.failed[CRITIC_ERROR])) if n]
    if unasked:
        raise Unfinished(f"{'; '.join(unasked)}: run validate again once it answers", summary)
    return summary


def _write_dataset(
    path: Path, review_report: Path, items: list[CuqaItem], force: bool
) -> str:
    """Write the passed items, unless people reviewed this run: their verdicts are never
    overwritten, not even a review that accepted nothing (pulling the annotations again
    applies the new verdicts). A review report in which nobody judged anything (an empty
    export, say) protects nothing: it and its empty file are replaced."""
    reviewed = sum(item.review.status != "unreviewed" for item in iter_jsonl(path, CuqaItem))
    if reviewed or _judged_something(review_report):
        return (f"(kept {path}: it holds the {reviewed} items accepted by review; "
                "`cuqa-annotate pull` or `import` again applies these verdicts)")
    check_replacement(path, len(items), "items that passed", force)
    review_report.unlink(missing_ok=True)
    write_jsonl(path, items)
    return f"-> {path}"


def _judged_something(review_report: Path) -> bool:
    """Whether a review report records any judgement; one that cannot be read counts as yes."""
    if not review_report.exists():
        return False
    try:
        report = ReviewReport.model_validate_json(review_report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True
    return report.reviewed > 0
