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

from cuqa_builder.generation.yield_report import yield_lines
from cuqa_builder.grounding.verdicts import GROUNDING_CHECKS
from cuqa_builder.item_mix import mix_line
from cuqa_builder.jsonio import iter_jsonl, read_jsonl, write_jsonl
from cuqa_builder.llm.cache import CallCache
from cuqa_builder.llm.estimate import (
    CallPlan,
    PlanningGateway,
    StandIn,
    cache_to_read,
    calibration,
)
from cuqa_builder.llm.settings import LLMSettings, resolve_settings
from cuqa_builder.llm.types import ChatRequest, GatewayStats
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
from cuqa_builder.review_report import ReviewReport
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
from cuqa_builder.validation.connected import (
    CHECKER_ERROR,
    check_all,
    record_checker,
    verdicts_of,
)
from cuqa_builder.validation.critic import (
    CRITIC_CHECKS,
    CRITIC_ERROR,
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
    PROBE_SAMPLING,
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
    GUESS_SAMPLING,
    GUESS_TEMPLATE,
    JUDGE_TEMPLATE,
    OPEN_BOOK_SAMPLING,
    OPEN_BOOK_TEMPLATE,
    UNREADABLE,
    ItemChecker,
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


# Probe answers are "just a few words"; the judge says Yes or No; the checker gives five short
# guesses, or three short lines.
PROBE_OUT_TOKENS, JUDGE_OUT_TOKENS = 8, 2
GUESS_OUT_TOKENS, OPEN_BOOK_OUT_TOKENS = 25, 20


def estimate(ctx: RunContext, planned_candidates: int = 0) -> list[CallPlan]:
    """The checker's calls and the probes' (and the judge's) that validate would make now, and
    those of `planned_candidates` not generated yet. The candidates it would ask (those that
    pass the format checks and their recorded grounding, and for the probes the checker) are
    asked again of a stand-in that answers from the call cache: what the cache holds costs
    nothing (`CallPlan.cached`), as in a re-run."""
    candidates = read_jsonl(ctx.path(CANDIDATES), Candidate)
    settings = resolve_settings(ctx.options.llm, default_cache=ctx.path(LLM_CACHE))
    with cache_to_read(settings) as cache:
        return asyncio.run(_replay(ctx, settings, cache, _asked(ctx, candidates),
                                   planned_candidates))


def _asked(ctx: RunContext, candidates: list[Candidate]) -> list[Candidate]:
    """The candidates validate would ask about: those passing the format checks, the grounding
    verdicts the last validate recorded (none yet: assumed to pass) and the stale check."""
    report = format_checks(candidates, ctx.options.checks.limits,
                           [_grounding_failures(c.grounding) for c in candidates])
    _mark_stale(ctx, candidates, report)
    return [c for c, v in zip(candidates, report.validations, strict=True) if v.passed]


async def _replay(ctx: RunContext, settings: LLMSettings, cache: CallCache | None,
                  asked: list[Candidate], planned_candidates: int) -> list[CallPlan]:
    probe, judge = _probe_plans(ctx)
    generator = settings.model or settings.local
    model = checker_model(ctx, generator)
    plans, probed = [], asked
    if model is not None:
        plan, probed = await _replay_checker(ctx, model, cache, asked, probe)
        # The generator as checker answered while composing: its answers are in the cache.
        composed = model == generator and not settings.uses_local_model
        _plan_typical_checks(ctx, plan, 0 if composed else planned_candidates)
        if composed and planned_candidates:
            plan.notes.append(f"checker: the {planned_candidates} candidates not generated yet "
                              "are checked while composing (counted under generate)")
        plan.notes.append("checker: a judge call where a guess shares words with the answer "
                          "without naming it is not planned")
        plans.append(plan)
    if probe is not None:
        await _replay_probes(probe, judge, cache, probed)
        _plan_typical_probes(probe, judge, planned_candidates)
        plans += [probe] if judge is None or judge is probe else [probe, judge]
    return plans


_CHECKER_STAND_INS = {
    GUESS_TEMPLATE: StandIn("checker: guesses", GUESS_OUT_TOKENS, "1. Atlantis"),
    OPEN_BOOK_TEMPLATE: StandIn("checker: with the event", OPEN_BOOK_OUT_TOKENS, "Answer: none"),
    JUDGE_TEMPLATE: StandIn("checker: judge", JUDGE_OUT_TOKENS, "No"),
}


def _checker_stand_in(request: ChatRequest) -> StandIn:
    return _CHECKER_STAND_INS[request.template or GUESS_TEMPLATE]


async def _replay_checker(
    ctx: RunContext, model: str, cache: CallCache | None, asked: list[Candidate],
    probe: CallPlan | None,
) -> tuple[CallPlan, list[Candidate]]:
    """The checker's calls for the candidates asked, as `check_all` makes them (the --probe-model
    guessing at the whole question), and the candidates the probes are asked about then: those
    it passes, and those it could only pass on answers not cached yet."""
    settings = model_settings(ctx.options, ctx.path(LLM_CACHE), model,
                              ctx.options.checks.check_base_url)
    plan = CallPlan(model, calibration(settings, model), rounds=2)  # guesses, then the event
    client = PlanningGateway(plan, _checker_stand_in, cache, api=settings.api,
                             held=settings.held_to_format)
    guesser = None
    if probe is not None:
        guesser = client if probe.model == model else PlanningGateway(
            probe, _checker_stand_in, cache)
    checker = ItemChecker(client, ctx.window.label, counted=ctx.options.checks.guesses,
                          guesser=guesser)
    passed = []
    for candidate in asked:
        before = _planned(client, guesser)
        verdicts = await verdicts_of(checker, candidate)
        if all(v.passed for v in verdicts) or _planned(client, guesser) > before:
            passed.append(candidate)
    return plan, passed


def _planned(*gateways: PlanningGateway | None) -> int:
    return sum(gateway.planned for gateway in gateways if gateway is not None)


def _plan_typical_checks(ctx: RunContext, plan: CallPlan, candidates: int) -> None:
    """The checker's calls for `candidates` not generated yet, with questions, events and
    passages of the usual length: two guesses and one answer with the event each."""
    if not candidates:
        return
    guess, open_book = load_prompt(GUESS_TEMPLATE), load_prompt(OPEN_BOOK_TEMPLATE)
    cutoff = cutoff_phrase(ctx.window.label)
    typical = "x" * plan.calibration.chars(25)
    plan.add("checker: guesses", len(guess.render(question=typical, cutoff=cutoff)),
             int(GUESS_SAMPLING["max_tokens"]), GUESS_OUT_TOKENS, template=GUESS_TEMPLATE,
             times=2 * candidates)
    prompt = open_book.render(question=typical, event=typical * 2, passage=typical * 8, date="",
                              cutoff=cutoff)
    plan.add("checker: with the event", len(prompt), int(OPEN_BOOK_SAMPLING["max_tokens"]),
             OPEN_BOOK_OUT_TOKENS, template=OPEN_BOOK_TEMPLATE, times=candidates)
    plan.notes.append(f"checker: the {candidates} candidates not generated yet are assumed to "
                      "pass the format checks")


def _probe_plans(ctx: RunContext) -> tuple[CallPlan | None, CallPlan | None]:
    """The probe model's plan and the judge's (the same plan for the same model); none without
    --probe-model."""
    options = ctx.options
    if not options.checks.probe_model:
        return None, None
    probe, judging = probe_settings(options, ctx.path(LLM_CACHE))
    probe_model = probe.model or probe.local or ""
    plan = CallPlan(probe_model, calibration(probe, probe_model), rounds=1)
    if judging is None:
        return plan, None
    judge_model = judging.model or judging.local or ""
    judge = plan if judge_model == probe_model else CallPlan(
        judge_model, calibration(judging, judge_model))
    judge.rounds = 2
    return plan, judge


def _probe_stand_in(request: ChatRequest) -> StandIn:
    if request.template == CLOSED_BOOK:
        return StandIn("probe: closed book", PROBE_OUT_TOKENS, "x")
    if request.template == WITH_UNKNOWN_ANSWER:
        return StandIn("probe: with the unknown part", PROBE_OUT_TOKENS, "x")
    return StandIn("judge", JUDGE_OUT_TOKENS, "No")


async def _replay_probes(probe: CallPlan, judge: CallPlan | None, cache: CallCache | None,
                         probed: list[Candidate]) -> None:
    gateway = PlanningGateway(probe, _probe_stand_in, cache)
    judge_gateway = None if judge is None else gateway if judge is probe else PlanningGateway(
        judge, _probe_stand_in, cache)
    prober = Prober(gateway, judge_gateway)
    for candidate in probed:
        await prober.probe(candidate)


def _plan_typical_probes(probe: CallPlan, judge: CallPlan | None, candidates: int) -> None:
    """The probes' calls for `candidates` not generated yet: the question and one known
    sub-question closed book, the question with the unknown part given; each judged."""
    if not candidates:
        return
    from cuqa_builder.judge import DEFAULT_JUDGE_PROMPT, judge_prompt

    typical = "x" * probe.calibration.chars(30)
    closed, given = load_prompt(CLOSED_BOOK), load_prompt(WITH_UNKNOWN_ANSWER)
    prompts = [("closed book", CLOSED_BOOK, closed.render(question=typical), 2),
               ("with the unknown part", WITH_UNKNOWN_ANSWER,
                given.render(question=typical, passage=typical), 1)]
    for step, template, prompt, times in prompts:
        probe.add(f"probe: {step}", len(prompt), int(PROBE_SAMPLING["max_tokens"]),
                  PROBE_OUT_TOKENS, template=template, times=times * candidates)
    if judge is not None:
        chosen = judge_prompt(DEFAULT_JUDGE_PROMPT)  # the one the probes' judge uses
        answer = "x" * probe.calibration.chars(PROBE_OUT_TOKENS)
        values = {"question": typical, "prediction": answer, chosen.answers_slot: answer}
        judge.add("judge", len(load_prompt(chosen.template).render(**values)), 8,
                  JUDGE_OUT_TOKENS, template=chosen.template, times=3 * candidates)
    probe.notes.append(f"probes: the {candidates} candidates not generated yet are assumed to "
                       "pass the checks, with one known sub-question each")


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
    if check == UNREADABLE:  # the checker wrote what could not be read, not the generator
        tries = ["another --check-model (one that answers in the shape its prompt asks for; "
                 "each reply is quoted in its failure)", "a larger --limit"]
    else:
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
    # First: a model that could not be asked explains the rest.
    lines += [f"  {who} could not be asked about {n} candidates (they fail {check}): "
              f"{_ask_again(report, [who])}" for (check, who), n in report.unasked.items()]
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


def _ask_again(report: CheckReport, whom: Sequence[str]) -> str:
    """What asking those models again takes: a batch call that failed in every round
    --max-retries allows is asked again only with a larger one."""
    if report.given_up.isdisjoint(whom):
        return "run validate again once it answers"
    return ("run validate again once it answers, with a larger --max-retries (its batch calls "
            "failed in every round the last one allowed)")


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
        extra.append((line, (*CHECKER_CHECKS, *((UNREADABLE,) if report.failed[UNREADABLE]
                                                 else ()))))
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
    counts = _check_counts(report, _format_check_names(report), extra)
    # what the release's card reports
    save_run_info(ctx.out, validation=settings.model_copy(update={"counts": counts}))
    failures = read_jsonl(ctx.path(GENERATION_FAILURES), GenerationFailure)
    generation = load_run_info(ctx.out).generation
    summary = _summary(report, len(passed), dataset, extra, yield_lines(validated, failures),
                       generation.known_source if generation else None)
    # The verdicts are written; a model that could not be asked leaves the run unfinished.
    if report.unasked:
        unasked = "; ".join(f"{who} could not be asked about {n} candidates"
                            for (_, who), n in report.unasked.items())
        whom = [who for _, who in report.unasked]
        raise Unfinished(f"{unasked}: {_ask_again(report, whom)}", summary)
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
