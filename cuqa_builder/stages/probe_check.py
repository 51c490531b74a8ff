"""Is the --probe-model a model of the cutoff? Every "unknown before the cutoff" verdict rests
on it, so the build checks it before the pool is screened: the probe model answers closed-book
one-hop questions about the run's own first events after the cutoff, written and judged as the
cutoff probe does (`evaluation/cutoff_probe.py`: a candidate's unknown sub-question, else Table
5's question by the generator; the judge, else normalised match). A model that answers many of
them knew those events: the run stops with the figures, or with --allow-late-probe-model warns
and goes on. The check is recorded in run.json (and so in the card). Its calls go through the
gateways and the run's cache: a re-run pays nothing again."""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from datetime import timedelta

from cuqa_builder.cutoff_estimate import ProbeModelCheck
from cuqa_builder.errors import CuqaError
from cuqa_builder.evaluation.cutoff_probe import (
    ProbeGateways,
    ask_about,
    candidate_questions,
    sample_by_month,
)
from cuqa_builder.jsonio import iter_jsonl
from cuqa_builder.llm.gateway import Gateway, open_gateway
from cuqa_builder.records.events import Event
from cuqa_builder.run import (
    CANDIDATES,
    EVENTS,
    LLM_CACHE,
    RunContext,
    load_run_info,
    save_run_info,
)
from cuqa_builder.stages.endpoints import probe_settings
from cuqa_builder.validation.probes import NORMALISED_MATCH

log = logging.getLogger(__name__)

CHECK_DAYS = 92  # the events of about three months after the cutoff
QUESTIONS = 8
MIN_QUESTIONS = 4  # fewer questions say nothing either way
KNOWS_AT = 0.5  # a model of the cutoff answers few: a guess, a name in the question


class LateProbeModel(CuqaError):
    """The probe model answered the questions about events after the cutoff: exit status 1."""


async def check_probe_model(
    ctx: RunContext, generator: Gateway, stack: AsyncExitStack, batch_files: bool
) -> ProbeModelCheck | None:
    """Ask, record and judge; None without --probe-model. Raises LateProbeModel when the model
    knew the events and --allow-late-probe-model is not given."""
    checks = ctx.options.checks
    if not checks.probe_model:
        return None
    start = ctx.window.cutoff + timedelta(days=1)
    end = start + timedelta(days=CHECK_DAYS - 1)
    days = f"{start} to {end}"
    if batch_files:  # its answers would come a round later, after the pool it is to guard
        return _recorded(ctx, ProbeModelCheck(
            model=checks.probe_model, judge="-", events=days, asked=0, correct=0,
            limit=KNOWS_AT, outcome="skipped", note="not run with --batch-files: run generate "
            "once without it, or `cuqa-eval cutoff` on the probe model"))
    done = load_run_info(ctx.out).probe_model_check
    if done is not None and done.outcome != "skipped" and (done.model, done.events) == (
            checks.probe_model, days):
        # checked before: the questions would now be drawn from the candidates made since
        # (other requests, paid again), so the recorded check stands
        return _judged(ctx, done.model_copy(update={"outcome": _outcome(
            done.asked, done.correct, checks.allow_late_probe_model)}))
    events = [e for e in iter_jsonl(ctx.path(EVENTS), Event) if start <= e.date <= end]
    reused = candidate_questions(ctx.path(CANDIDATES))
    usable = [e for e in events if e.id in reused or e.entities]
    picked = [e for month in sample_by_month(usable, QUESTIONS, ctx.options.generate.seed)
              .values() for e in month][:QUESTIONS]
    probe, judging = probe_settings(ctx.options, ctx.path(LLM_CACHE))
    target = await stack.enter_async_context(open_gateway(probe))
    judge = None if judging is None else target if judging == probe else (
        await stack.enter_async_context(open_gateway(judging)))
    asked, _ = await ask_about(ProbeGateways(target, generator, judge), {"": picked}, reused,
                               ctx.options.generate.seed, progress=not ctx.options.quiet)
    correct = sum(question.correct for question in asked)
    knows = _outcome(len(asked), correct, False) == "knows the events"
    return _judged(ctx, ProbeModelCheck(
        model=target.model, judge=judge.model if judge else NORMALISED_MATCH, events=days,
        asked=len(asked), correct=correct, limit=KNOWS_AT,
        outcome=_outcome(len(asked), correct, checks.allow_late_probe_model),
        note=f"{len(events)} events in those days, {len(picked)} picked" if not knows else ""))


def _outcome(asked: int, correct: int, allowed: bool) -> str:
    if asked < MIN_QUESTIONS:
        return "too few questions"
    if correct < KNOWS_AT * asked:
        return "passed"
    return "allowed" if allowed else "knows the events"


def _judged(ctx: RunContext, check: ProbeModelCheck) -> ProbeModelCheck:
    """The check recorded; the run stopped when the model knew the events (and going on was
    not allowed), a warning when it was."""
    _recorded(ctx, check)
    if check.outcome == "knows the events":
        raise LateProbeModel(
            f"{check.line()}: its knowledge seems to go past the cutoff {ctx.window.label}, "
            "so its verdicts of 'unknown before the cutoff' would not hold; choose a model "
            "whose knowledge ends by then (docs/probe-models.md), or go on with "
            "--allow-late-probe-model")
    if check.outcome == "allowed":
        log.warning("%s: its knowledge seems to go past the cutoff (--allow-late-probe-model: "
                    "going on)", check.line())
    return check


def _recorded(ctx: RunContext, check: ProbeModelCheck) -> ProbeModelCheck:
    save_run_info(ctx.out, probe_model_check=check)
    return check
