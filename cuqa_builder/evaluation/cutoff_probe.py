"""`cuqa-eval cutoff`: where does a model's knowledge really end?

Over a run's events (built with a cutoff well before the model's claimed one), per month:
1. sample `--per-month` events, seeded (the events ranked by a hash of the seed and their id,
   so a sample is stable when more events arrive), among those a question can be asked about;
2. take a one-hop question about each event: the unknown sub-question of the run's candidate for
   it when there is one, else one written by Algorithm 1's UnknownQuestionGen step (Table 5's
   prompt, the same entity draw and seed as the generate stage), whose answer is the entity;
3. ask the model closed-book (Table 14's direct prompt, greedy) and score the answer with the
   judge (`--judge-model`) or by normalised match against the answer and its aliases;
4. count accuracy per month with a 95% Wilson interval, and estimate the cutoff by the rule in
   `cutoff_estimate.py`.
Writes OUT/questions.jsonl (every question, answer and verdict), OUT/cutoff.json, OUT/cutoff.png,
and a copy of cutoff.json where `cuqa-build --cutoff auto:MODEL` finds it. Every call goes
through the gateway's cache (OUT/llm-cache.sqlite by default): a re-run pays nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel
from tqdm import tqdm

from cuqa_builder.cutoff_estimate import (
    RESULT_FILE,
    CutoffProbeError,
    CutoffProbeOptions,
    CutoffProbeResult,
    estimate_cutoff,
    month_accuracy,
    registry_path,
)
from cuqa_builder.generation.algorithm import Generator
from cuqa_builder.generation.seeding import draw
from cuqa_builder.generation.steps import UNKNOWN_QUESTION_GEN, GenerationError
from cuqa_builder.jsonio import atomic_write_json, iter_jsonl, write_jsonl
from cuqa_builder.llm.gateway import Gateway, open_gateway
from cuqa_builder.llm.settings import LLMOptions, LLMSettings, resolve_settings
from cuqa_builder.llm.types import LLMError
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Entity, Event, answer_aliases
from cuqa_builder.run import CANDIDATES, LLM_CACHE
from cuqa_builder.text import contains_answer
from cuqa_builder.validation.probes import NORMALISED_MATCH, Prober

log = logging.getLogger(__name__)

QUESTIONS = "questions.jsonl"
PLOT = "cutoff.png"


class ProbeQuestion(BaseModel):
    """One line of OUT/questions.jsonl."""

    event_id: str
    month: str
    event: str
    question: str
    answers: list[str]
    source: Literal["candidate", "generated"]
    prediction: str
    correct: bool


@dataclass(frozen=True)
class _Question:
    event: Event
    question: str
    answers: list[str]
    source: Literal["candidate", "generated"]


def month_of(event: Event) -> str:
    return f"{event.date:%Y-%m}"


def _rank(seed: int, event_id: str) -> str:
    return hashlib.sha256(f"{seed}:{event_id}".encode()).hexdigest()


def sample_by_month(events: Sequence[Event], per_month: int, seed: int) -> dict[str, list[Event]]:
    """Up to `per_month` events of each month, the same ones for the same seed."""
    months: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        months[month_of(event)].append(event)
    return {
        month: sorted(found, key=lambda e: _rank(seed, e.id))[:per_month]
        for month, found in sorted(months.items())
    }


def candidate_questions(path: Path | None) -> dict[str, tuple[str, list[str]]]:
    """Event id -> (unknown sub-question, its answer and aliases) of the easy candidates."""
    if path is None or not path.is_file():
        return {}
    found: dict[str, tuple[str, list[str]]] = {}
    for candidate in iter_jsonl(path, Candidate):
        unknown = [s for s in candidate.sub_questions if s.kind == "unknown"]
        if candidate.difficulty != "easy" or not unknown:
            continue
        entity = candidate.intermediates.cur_ent if candidate.intermediates else None
        aliases = answer_aliases(entity) if entity else []
        found.setdefault(candidate.event.id, (unknown[0].question,
                                              list(dict.fromkeys([unknown[0].answer, *aliases]))))
    return found


async def _without_passages(_: str) -> list[Entity]:
    """The probe only runs UnknownQuestionGen, which reads no known passage."""
    return []


async def _generated_question(generator: Generator, event: Event) -> _Question | None:
    """Table 5's question about the event, answered by the entity Algorithm 1 would draw; None
    when the event has no entity or the model's question is unusable or names its answer."""
    if not event.entities:
        return None
    draws = draw(generator.seed, event.id, len(event.entities))
    entity = event.entities[draws.cur_index]
    values = {"unknown_event": event.text, "unknown_entity": entity.text}
    try:
        call = await generator.call(UNKNOWN_QUESTION_GEN, values, draws.api_seed)
    except GenerationError:
        return None
    answers = list(dict.fromkeys([entity.text, *answer_aliases(entity)]))
    if any(contains_answer(call.parsed, answer) for answer in answers):
        return None
    return _Question(event, call.parsed, answers, "generated")


@dataclass
class ProbeGateways:
    """The model asked closed-book, the one that writes the questions, and the judge (None:
    normalised match)."""

    target: Gateway
    questions: Gateway
    judge: Gateway | None


def _at(settings: LLMSettings, model: str) -> LLMSettings:
    if settings.uses_local_model:
        return settings.model_copy(update={"local": model})
    return settings.model_copy(update={"model": model})


@asynccontextmanager
async def _open(
    settings: LLMSettings, options: CutoffProbeOptions
) -> AsyncIterator[ProbeGateways]:
    """The target model's gateway, and the question writer's and judge's (the same one when
    they name the same model)."""
    async with AsyncExitStack() as stack:
        target = await stack.enter_async_context(open_gateway(settings))
        opened = {target.model: target}

        async def gateway_for(model: str | None) -> Gateway:
            if model is None:
                return target
            if model not in opened:
                opened[model] = await stack.enter_async_context(
                    open_gateway(_at(settings, model))
                )
            return opened[model]

        yield ProbeGateways(target, await gateway_for(options.question_model),
                        await gateway_for(options.judge_model) if options.judge_model else None)


async def ask_about(
    gateways: ProbeGateways, sample: dict[str, list[Event]],
    reused: dict[str, tuple[str, list[str]]], seed: int, progress: bool,
) -> tuple[list[ProbeQuestion], int]:
    """The questions asked and their verdicts, and how many events failed for good (the cutoff
    probe's, and the build's check of its --probe-model: `stages/probe_check.py`)."""
    generator = Generator(gateways.questions, _without_passages, seed=seed, cutoff="")
    prober = Prober(gateways.target, gateways.judge)
    events = [event for month in sample.values() for event in month]
    bar = tqdm(total=len(events), desc="cutoff probe", unit="event", disable=not progress)
    failures: list[str] = []

    async def ask(event: Event) -> ProbeQuestion | None:
        try:
            if event.id in reused:
                question, answers = reused[event.id]
                asked: _Question | None = _Question(event, question, answers, "candidate")
            else:
                asked = await _generated_question(generator, event)
            if asked is None:
                return None
            answer = await prober.ask_closed_book(asked.question, asked.answers)
            return ProbeQuestion(
                event_id=event.id, month=month_of(event), event=event.text,
                question=asked.question, answers=asked.answers, source=asked.source,
                prediction=answer.prediction, correct=answer.correct,
            )
        except LLMError as exc:  # one question lost, not the probe
            failures.append(f"{event.id}: {exc}")
            return None

    async def one(event: Event) -> ProbeQuestion | None:
        asked = await ask(event)
        bar.update()  # not for a question cancelled by Ctrl-C: the bar shows what was done
        return asked

    with bar:
        found = await asyncio.gather(*(one(event) for event in events))
    if failures:
        log.warning("%d questions could not be asked (first: %s); run again to retry them",
                    len(failures), failures[0])
    return [question for question in found if question is not None], len(failures)


def _usable(events: list[Event], reused: dict[str, tuple[str, list[str]]]) -> list[Event]:
    """Events a question can be asked about: a candidate's, or one with an entity."""
    return [event for event in events if event.id in reused or event.entities]


async def probe_cutoff(
    events_path: Path, out: Path, options: CutoffProbeOptions, llm: LLMOptions,
    progress: bool = True,
) -> CutoffProbeResult:
    """Run the probe and write its files; returns the result (also in OUT/cutoff.json)."""
    events = list(iter_jsonl(events_path, Event))
    if not events:
        raise CutoffProbeError(f"{events_path} holds no events: nothing to ask about")
    reused = candidate_questions(options.candidates or events_path.parent / CANDIDATES)
    sample = sample_by_month(_usable(events, reused), options.per_month, options.seed)
    out.mkdir(parents=True, exist_ok=True)
    settings = resolve_settings(llm, default_cache=out / LLM_CACHE)
    async with _open(settings, options) as gateways:
        asked, failed = await ask_about(gateways, sample, reused, options.seed, progress)
        model = gateways.target.model
        judge = gateways.judge.model if gateways.judge else NORMALISED_MATCH
    sampled = sum(len(found) for found in sample.values())
    months = [
        month_accuracy(month, sum(q.month == month for q in asked),
                       sum(q.month == month and q.correct for q in asked))
        for month in sample
    ]
    result = CutoffProbeResult(
        model=model, judge=judge, events=str(events_path.resolve()),
        per_month=options.per_month, seed=options.seed, events_sampled=sampled,
        questions_from_candidates=sum(q.source == "candidate" for q in asked),
        questions_generated=sum(q.source == "generated" for q in asked),
        unusable=sampled - len(asked) - failed, failed=failed,
        months=months, estimate=estimate_cutoff(months, options.margin),
        probed=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    _write(out, asked, result)
    return result


def _write(out: Path, asked: list[ProbeQuestion], result: CutoffProbeResult) -> None:
    from cuqa_builder.evaluation.plots import plot_cutoff_probe  # matplotlib: ~1 s to import

    write_jsonl(out / QUESTIONS, asked)
    data = result.model_dump(mode="json")
    atomic_write_json(out / RESULT_FILE, data)
    atomic_write_json(registry_path(result.model), data)
    plot_cutoff_probe(result, out / PLOT)


def summarize(result: CutoffProbeResult, out: Path) -> str:
    left_out = [f"{n} {why}" for n, why in ((result.unusable, "without a usable question"),
                                             (result.failed, "whose calls failed")) if n]
    lines = [f"cutoff probe of {result.model} (judge: {result.judge}): "
             f"{result.events_sampled} events sampled; questions: "
             f"{result.questions_from_candidates} from candidates, "
             f"{result.questions_generated} generated"
             + (f"; left out: {', '.join(left_out)}" if left_out else "")]
    lines += [f"  {m.month}  {m.correct:>3}/{m.asked:<3} {m.accuracy:>4.0%}  "
              f"[{m.low:.0%}, {m.high:.0%}]" if m.asked else f"  {m.month}  no question"
              for m in result.months]
    estimate = result.estimate
    if estimate.cutoff:
        lines.append(f"estimated cutoff: {estimate.cutoff} ({estimate.reason}); use it with "
                     f"`cuqa-build --cutoff auto:{result.model}`")
    else:
        lines.append(f"no cutoff found in the window: {estimate.reason}")
    lines.append(f"-> {out / RESULT_FILE}, {out / PLOT}, {out / QUESTIONS}")
    return "\n".join(lines)
