"""Algorithm 1's calls, planned without making any (for `--estimate`, see `llm/estimate.py`).

Each event's draws (seeded, as in a real run) pick its entity and branch, so the first two
prompts are exactly those the run will send; the later ones hold stand-in text as long as the
expected passage and questions. A step is asked again when its check refuses the reply, and the
connected recipe tries up to three bridges: once the run's records hold a few events, each step
is planned as many times per event as they show (`StepRates`), else once per event. With the
embedded model (structure first) the connected recipe asks nothing: its description comes from
the parse and its known question from a template.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from cuqa_builder.generation.algorithm import Generator
from cuqa_builder.generation.connected import MAX_BRIDGES, ConnectedGenerator
from cuqa_builder.generation.describing import DESCRIBE_BRIDGES
from cuqa_builder.generation.known_facts import KNOWN_FACTS, KNOWN_FACTS_MODEL
from cuqa_builder.generation.seeding import draw
from cuqa_builder.generation.steps import (
    KNOWN_EVENTS_GEN,
    KNOWN_QUESTION_GEN,
    KNOWN_QUESTION_GEN2,
    MERGE_QUESTIONS,
    UNKNOWN_QUESTION_GEN,
    Sampling,
    Step,
)
from cuqa_builder.jsonio import iter_jsonl
from cuqa_builder.llm.estimate import CallPlan
from cuqa_builder.prompts import PromptTemplate, load_prompt
from cuqa_builder.records.events import Event
from cuqa_builder.records.items import KnownSource
from cuqa_builder.verification.checker import CALL_NAMES
from cuqa_builder.verification.pooled import (
    GUESS_MANY_TEMPLATE,
    GUESSES_PER_REQUEST,
    JUDGE_MANY_TEMPLATE,
    JUDGED_PER_REQUEST,
    OPEN_BOOK_MANY_TEMPLATE,
    OPEN_BOOKS_PER_REQUEST,
)

# Output lengths before the cache knows the model: a question with a short lead-in, and most of
# a "detailed passage" (its max_tokens is 384).
QUESTION_TOKENS = 30
PASSAGE_TOKENS = 300
# five short guesses; three short lines; a judge's "Q1: No"
GUESS_TOKENS, OPEN_BOOK_TOKENS, JUDGE_TOKENS = 25, 20, 3
# Dependent steps: (unknown question + passage), known question, merge.
EASY_ROUNDS = 3
MIN_EVENTS = 5  # records of fewer events say little about a step's repairs
# With the embedded model (structure first) most events give no candidate: 12 of the 58 events
# of the two example snapshots did (their bridges' articles lack an infobox relation to ask, or
# the parse gives no description).
STRUCTURE_FIRST_MADE = 12 / 58


class _Call(BaseModel):
    function: str


class _Steps(BaseModel):
    calls: list[_Call] = []


class _EventId(BaseModel):
    id: str


class _Record(BaseModel):
    """What counting a record's calls needs of a candidate or a failure (not all of it)."""

    event: _EventId | None = None  # a candidate's
    event_id: str | None = None  # a failure's
    difficulty: str = "easy"
    intermediates: _Steps | None = None
    calls: list[_Call] = []  # a failure's
    sub_items: list[object] = []  # a failed hard item's


@dataclass(frozen=True)
class StepRates:
    """Calls per event of each step, as the run's records count them: every attempt (refused
    ones too), the other bridges tried, the events that failed. What a step really costs with
    this model and recipe."""

    per_event: dict[str, float]
    events: int
    made: float = 1.0  # candidates per event (the others failed)

    @classmethod
    def from_records(cls, candidates: Path, failures: Path) -> StepRates | None:
        """From `candidates.jsonl` and `generation-failures.jsonl`; None for fewer than
        `MIN_EVENTS` easy events."""
        calls: Counter[str] = Counter()
        events: set[str] = set()
        made = 0
        for path in (candidates, failures):
            if not path.exists():
                continue
            for record in iter_jsonl(path, _Record):
                if record.difficulty != "easy" or record.sub_items:
                    continue
                events.add(record.event.id if record.event else record.event_id or "")
                made += record.intermediates is not None
                asked = record.intermediates.calls if record.intermediates else record.calls
                calls.update(call.function for call in asked)
        if len(events) < MIN_EVENTS:
            return None
        return cls({step: n / len(events) for step, n in calls.items()}, len(events),
                   made / len(events))

    def times(self, function: str) -> float:
        """Calls per event of a step or a check, by the name its calls are recorded under."""
        return self.per_event.get(function, 0.0)


def _call(plan: CallPlan, templates: dict[str, PromptTemplate], step: Step, max_tokens: int,
          expected: int, label: str | None = None, times: float = 1.0, **values: str) -> str:
    """Plan one step's call (`times` of it); returns stand-in text as long as its expected
    output."""
    if times <= 0:  # a step the event will not ask: nothing planned, text for the next ones
        out = min(plan.calibration.tokens_out(step.template, expected), max_tokens)
        return "x" * plan.calibration.chars(out)
    prompt = templates[step.template].render(**values)
    out = plan.add(label or step.function, len(prompt), max_tokens, expected,
                   template=step.template, times=times)
    return "x" * plan.calibration.chars(out)


def plan_easy(plan: CallPlan, events: Iterable[Event], seed: int,
              templates: dict[str, PromptTemplate], sampling: Sampling,
              recipe: type[Generator] = Generator, known_source: KnownSource = "model",
              rates: StepRates | None = None, structure_first: bool = False,
              checked: bool = False, pool_size: int = 12) -> int:
    """Plan the recipe for each event (each must have entities); returns how many. `rates`:
    each step's calls per event as measured, else once per event (the drawn branch's).
    `checked`: the connected recipe asks the checker while composing."""
    if recipe is ConnectedGenerator:
        count = _plan_connected(plan, events, templates, sampling, known_source, rates,
                                structure_first, checked, pool_size)
    else:
        count = _plan_paper(plan, events, seed, templates, sampling, rates)
    plan.rounds = max(plan.rounds, EASY_ROUNDS if count and plan.calls else 0)
    made = rates.made if rates else STRUCTURE_FIRST_MADE if structure_first else 1.0
    plan.items += round(count * made)
    if made < 1:
        plan.notes.append(f"generate: {made:.0%} of the events give a candidate (" + (
            f"as in the run's {rates.events} events so far)" if rates else "with the embedded "
            "model on the example snapshots)"))
    if rates is not None:
        plan.notes.append(f"generate: each step planned as many times per event as the run's "
                          f"{rates.events} events took (refused attempts and other bridges "
                          "included)")
    return count


def _times(rates: StepRates | None, step: Step, drawn: bool = True) -> float:
    return rates.times(step.function) if rates is not None else float(drawn)


def _plan_paper(plan: CallPlan, events: Iterable[Event], seed: int,
                templates: dict[str, PromptTemplate], sampling: Sampling,
                rates: StepRates | None) -> int:
    short, long = sampling.question_max_tokens, sampling.passage_max_tokens
    count = 0
    for event in events:
        draws = draw(seed, event.id, len(event.entities))
        cur = event.entities[draws.cur_index].text
        unknown = _call(plan, templates, UNKNOWN_QUESTION_GEN, short, QUESTION_TOKENS,
                        times=_times(rates, UNKNOWN_QUESTION_GEN),
                        unknown_event=event.text, unknown_entity=cur)
        passage = _call(plan, templates, KNOWN_EVENTS_GEN, long, PASSAGE_TOKENS,
                        times=_times(rates, KNOWN_EVENTS_GEN), entity=cur)
        aab = _call(plan, templates, KNOWN_QUESTION_GEN, short, QUESTION_TOKENS,
                    times=_times(rates, KNOWN_QUESTION_GEN, draws.aab),
                    known_event=passage, entity=cur)
        # k_ent comes from the passage: stood in by a name as long as cur_ent
        abc = _call(plan, templates, KNOWN_QUESTION_GEN2, short, QUESTION_TOKENS,
                    times=_times(rates, KNOWN_QUESTION_GEN2, not draws.aab),
                    known_passage=passage, unknown_entity=cur, known_entity=cur)
        known = aab if draws.aab else abc
        _call(plan, templates, MERGE_QUESTIONS, short, QUESTION_TOKENS,
              times=_times(rates, MERGE_QUESTIONS), unknown_question=unknown,
              known_question=known)
        count += 1
    return count


def _plan_connected(plan: CallPlan, events: Iterable[Event],
                    templates: dict[str, PromptTemplate], sampling: Sampling,
                    known_source: KnownSource, rates: StepRates | None,
                    structure_first: bool, checked: bool, pool_size: int) -> int:
    """The connected recipe's pool, one event at a time: the bridges described (one request)
    and their known facts (one), and with `checked` its share of the pooled checks (the masked
    and the whole guesses of up to `pool_size` questions, the open book for a survivor, dealt
    across requests with other events' questions). Without `rates` each is planned once an
    event; the stand-in passages are as long as a lead. Structure first (the embedded
    model), none of them."""
    long = sampling.passage_max_tokens
    count = 0
    facts_step = KNOWN_FACTS if known_source == "wiki" else KNOWN_FACTS_MODEL
    guess, open_book = load_prompt(GUESS_MANY_TEMPLATE), load_prompt(OPEN_BOOK_MANY_TEMPLATE)
    judge = load_prompt(JUDGE_MANY_TEMPLATE)
    question = "x" * plan.calibration.chars(QUESTION_TOKENS)
    passage = "x" * plan.calibration.chars(PASSAGE_TOKENS)
    for event in events:
        pool = ConnectedGenerator.bridge_candidates(event)[:MAX_BRIDGES]
        if not pool:
            continue
        count += 1
        if structure_first:
            continue
        names = [e.text for e in pool]
        _call(plan, templates, DESCRIBE_BRIDGES, long, QUESTION_TOKENS * len(names),
              times=_times(rates, DESCRIBE_BRIDGES), event=event.text, date=str(event.date),
              cutoff="", bridges="\n".join(f"B{n}. {name}" for n, name in enumerate(names, 1)))
        things = "\n\n".join(f"T{n}. {name}\nArticle: {passage}" if known_source == "wiki"
                              else f"T{n}. {name}" for n, name in enumerate(names, 1))
        _call(plan, templates, facts_step, long, QUESTION_TOKENS * len(names),
              times=_times(rates, facts_step), event=event.text, date=str(event.date),
              cutoff="", things=things)
        if checked:
            size = min(GUESSES_PER_REQUEST, pool_size)
            asked = "\n".join(f"Q{n}. {question}" for n in range(1, size + 1))
            _ask_checker(plan, guess, "checker: guesses", GUESS_TOKENS * size,
                         _check_times(rates, GUESS_MANY_TEMPLATE, pool_size), questions=asked,
                         cutoff="")
            block = f"Q1. News of 1 May 2023: {event.text}\n{passage}\nQuestion: {question}"
            _ask_checker(plan, open_book, "checker: with the event", OPEN_BOOK_TOKENS,
                         _check_times(rates, OPEN_BOOK_MANY_TEMPLATE, pool_size),
                         questions="\n\n".join([block] * OPEN_BOOKS_PER_REQUEST), cutoff="")
            pair = f"Q1. Question: {question}\nPrediction: {question}\nGround-truth Answer: x"
            _ask_checker(plan, judge, "checker: judge", JUDGE_TOKENS * JUDGED_PER_REQUEST,
                         _check_times(rates, JUDGE_MANY_TEMPLATE, pool_size),
                         tasks="\n\n".join([pair] * JUDGED_PER_REQUEST))
    return count


def _check_times(rates: StepRates | None, template: str, pool_size: int) -> float:
    """A pooled check's requests per event, the questions of many events dealt across them:
    the guesses twice (masked, whole) for `pool_size` questions, the open book for one
    survivor, the judge for that survivor's six counted guesses (the second look). Measured by
    a pilot's records when there are some."""
    if rates is not None:
        return rates.times(CALL_NAMES[template])
    if template == GUESS_MANY_TEMPLATE:
        return 2.0 * pool_size / GUESSES_PER_REQUEST
    if template == JUDGE_MANY_TEMPLATE:
        return 6.0 / JUDGED_PER_REQUEST
    return 1.0 / OPEN_BOOKS_PER_REQUEST


def _ask_checker(plan: CallPlan, template: PromptTemplate, label: str, expected: int,
                 times: float, **values: str) -> None:
    if times > 0:
        plan.add(label, len(template.render(**values)), expected + 40, expected,
                 template=template.name, times=times)


def plan_hard(plan: CallPlan, pairs: int, templates: dict[str, PromptTemplate],
              sampling: Sampling) -> None:
    """`pairs` merges of two easy merged questions (one more round)."""
    question = "x" * plan.calibration.chars(
        plan.calibration.tokens_out(MERGE_QUESTIONS.template, QUESTION_TOKENS))
    for _ in range(pairs):
        _call(plan, templates, MERGE_QUESTIONS, sampling.question_max_tokens, QUESTION_TOKENS,
              label="MergeQuestions (hard)", unknown_question=question, known_question=question)
    if pairs:
        plan.rounds += 1
        plan.items += pairs
