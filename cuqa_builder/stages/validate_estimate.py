"""`--estimate` for the validate stage: the checker's calls and the probes' (and the
judge's) it would make now, nothing called or written. The candidates it would ask are asked
again of stand-ins that answer from the call cache, so what the cache holds costs nothing, as
in a re-run; candidates not generated yet are planned with prompts of the usual length."""

from __future__ import annotations

import asyncio

from cuqa_builder.jsonio import read_jsonl
from cuqa_builder.llm.cache import CallCache
from cuqa_builder.llm.estimate import CallPlan, PlanningGateway, StandIn, cache_to_read, calibration
from cuqa_builder.llm.settings import LLMSettings, resolve_settings
from cuqa_builder.llm.types import ChatRequest
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.run import CANDIDATES, LLM_CACHE, RunContext
from cuqa_builder.stages.endpoints import model_settings, probe_settings
from cuqa_builder.stages.validate import checker_model, grounding_failures, mark_stale
from cuqa_builder.validation.checks import check_all as format_checks
from cuqa_builder.validation.connected import verdicts_of
from cuqa_builder.validation.probes import CLOSED_BOOK, PROBE_SAMPLING, WITH_UNKNOWN_ANSWER, Prober
from cuqa_builder.verification.checker import (
    GUESS_SAMPLING,
    GUESS_TEMPLATE,
    JUDGE_TEMPLATE,
    OPEN_BOOK_SAMPLING,
    OPEN_BOOK_TEMPLATE,
    ItemChecker,
    cutoff_phrase,
)

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
                           [grounding_failures(c.grounding) for c in candidates])
    mark_stale(ctx, candidates, report)
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
