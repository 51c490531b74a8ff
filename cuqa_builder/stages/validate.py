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

from cuqa_builder.generation.yield_report import yield_lines
from cuqa_builder.grounding.verdicts import GROUNDING_CHECKS
from cuqa_builder.item_mix import mix_line
from cuqa_builder.jsonio import iter_jsonl, read_jsonl, write_jsonl
from cuqa_builder.llm.types import GatewayStats
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records.candidates import Candidate, CheckFailure, GenerationFailure
from cuqa_builder.records.events import Event
from cuqa_builder.records.items import CuqaItem, GroundingVerdict
from cuqa_builder.refresh import STALE, stale_candidates
from cuqa_builder.review_report import ReviewReport
from cuqa_builder.run import (
    ARTICLES,
    CANDIDATES,
    DATASET,
    EVENTS,
    GENERATION_FAILURES,
    LLM_CACHE,
    REVIEW_REPORT,
    RunContext,
    Unfinished,
    ValidationInfo,
    check_replacement,
    load_run_info,
    save_run_info,
)
from cuqa_builder.stages.endpoints import model_settings, open_checker, probe_settings
from cuqa_builder.stages.options import BuildOptions
from cuqa_builder.stages.validate_summary import (
    ask_again,
    check_counts,
    format_check_names,
    not_asked,
    summary_of,
)
from cuqa_builder.validation.checks import CheckReport
from cuqa_builder.validation.checks import check_all as format_checks
from cuqa_builder.validation.connected import check_all, record_checker
from cuqa_builder.validation.critic import (
    CRITIC_CHECKS,
    CRITIC_TEMPLATE,
    Critic,
    criticise_all,
    record_critic,
)
from cuqa_builder.validation.probes import (
    CHECKER,
    CLOSED_BOOK,
    JUDGE,
    PROBE_CHECKS,
    PROBE_ERROR,
    PROBE_MODEL,
    WITH_UNKNOWN_ANSWER,
    Prober,
    Roles,
    probe_all,
    record_probes,
)
from cuqa_builder.validation.selection import SELECTION_CHECKS, select
from cuqa_builder.verification.checker import (
    CHECKER_CHECKS,
    CHECKER_TEMPLATES,
    UNREADABLE,
    cutoff_phrase,
)


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
        record_probes(report, indexes, outcomes, gateway.model, Roles.of(
            (PROBE_MODEL, gateway.model),
            (JUDGE, judge_gateway.model if judge_gateway is not None else None)))
        return gateway.model, prober.judge_name, gateway.stats


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
        record_checker(report, indexes, outcomes, Roles.of(
            (CHECKER, gateway.model), (PROBE_MODEL, guesser.model if guesser else None)))
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


def grounding_failures(verdicts: list[GroundingVerdict]) -> list[CheckFailure]:
    return [CheckFailure(check=v.check, reason=f"{v.item}: {v.reason}" if v.item else v.reason)
            for v in verdicts if not v.passed]


def mark_stale(ctx: RunContext, candidates: list[Candidate], report: CheckReport) -> None:
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


def run(ctx: RunContext) -> str:
    path = ctx.path(CANDIDATES)
    candidates = read_jsonl(path, Candidate)
    options = ctx.options
    limits = options.checks.limits
    grounding, grounding_line = _grounding(ctx, candidates)
    report = format_checks(candidates, limits, [grounding_failures(v) for v in grounding])
    grounded = [v for verdicts in grounding for v in verdicts]
    report.applied.update(v.check for v in grounded)
    extra: list[tuple[str, Sequence[str]]] = [
        (grounding_line, GROUNDING_CHECKS if grounded else ())
    ]
    mark_stale(ctx, candidates, report)
    settings = ValidationInfo(limits=limits)
    if model := checker_model(ctx):
        line = asyncio.run(_ask_checker(ctx, model, candidates, report))
        extra.append((line, (*CHECKER_CHECKS, *((UNREADABLE,) if report.failed[UNREADABLE]
                                                 else ()))))
        settings = settings.model_copy(update={
            "check_model": model, "guesses": options.checks.guesses,
            "prompts": {name: load_prompt(name).sha256 for name in CHECKER_TEMPLATES},
        })
    else:
        extra.append((not_asked(ctx), ()))
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
    extra.append(_select(ctx, candidates, report))
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
    counts = check_counts(report, format_check_names(report), extra)
    # what the release's card reports
    save_run_info(ctx.out, validation=settings.model_copy(update={"counts": counts}))
    failures = read_jsonl(ctx.path(GENERATION_FAILURES), GenerationFailure)
    generation = load_run_info(ctx.out).generation
    summary = summary_of(report, len(passed), dataset, extra, yield_lines(validated, failures),
                       generation.known_source if generation else None)
    # The verdicts are written; a model that could not be asked leaves the run unfinished.
    if report.unasked:
        unasked = "; ".join(f"{who} could not be asked about {n} candidates"
                            for (_, who), n in report.unasked.items())
        whom = [who for _, who in report.unasked]
        raise Unfinished(f"{unasked}: {ask_again(report, whom)}", summary)
    return summary


def _select(ctx: RunContext, candidates: Sequence[Candidate], report: CheckReport
            ) -> tuple[str, Sequence[str]]:
    """Keep the best passed items of each event and no property over its share; the others
    fail `per_event` or `max_share`. The summary's line and its checks."""
    per_event, share = ctx.options.generate.per_event, ctx.options.checks.max_share
    passed = [(c, v) for c, v in zip(candidates, report.validations, strict=True) if v.passed]
    selection = select([c for c, _ in passed], per_event, share)
    for check in SELECTION_CHECKS:
        report.applied[check] += len(passed)
    for candidate, validation in passed:
        if failure := selection.dropped.get(candidate.id):
            validation.failures.append(failure)
            validation.passed = False
            report.failed[failure.check] += 1
    kept = [c for c, v in passed if v.passed]
    return (f"selection: the best {per_event} of each event, no property above "
            f"{share:.0%} of the items; {mix_line(kept)}", SELECTION_CHECKS)


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
