"""Algorithm 1 of the Self-DC paper (section 3.1): one unknown event -> one CuQA candidate.

Every random choice for an event is drawn up front from a generator seeded by the run's seed and
the event id, so the same event makes the same choices whatever `--limit`, order or resumption;
the same choices give the same prompts and sampling seed, so a re-run is served by the cache.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from cuqa_builder.errors import CuqaError
from cuqa_builder.generation.output_parsing import OutputError, parse_passage, parse_question
from cuqa_builder.llm.client import LLMClient, prompt_request
from cuqa_builder.llm.types import LLMError
from cuqa_builder.prompts import PromptTemplate, load_prompt
from cuqa_builder.records import (
    Candidate,
    Entity,
    Event,
    EventRef,
    GeneratorInfo,
    Intermediates,
    PromptCall,
    QuestionType,
    SubQuestion,
    answer_aliases,
)

EntityFinder = Callable[[str], Awaitable[list[Entity]]]
# A reply with no usable question is asked once more with another sampling seed (a new cache
# key); the unusable reply stays cached, so a re-run reproduces the same outcome for free.
PARSE_ATTEMPTS = 2


@dataclass(frozen=True)
class Step:
    """One function of Algorithm 1: its template, the placeholders it must have, its parser."""

    function: str
    template: str
    placeholders: frozenset[str]
    parse: Callable[[str], str]
    long_output: bool = False


UNKNOWN_QUESTION_GEN = Step(
    "UnknownQuestionGen", "unknown_question_gen",
    frozenset({"unknown_event", "unknown_entity"}), parse_question,
)
KNOWN_EVENTS_GEN = Step(
    "KnownEventsGen", "known_events_gen", frozenset({"entity"}), parse_passage, long_output=True
)
KNOWN_QUESTION_GEN = Step(
    "KnownQuestionGen", "known_question_gen", frozenset({"known_event", "entity"}), parse_question
)
KNOWN_QUESTION_GEN2 = Step(
    "KnownQuestionGen2", "known_question_gen2",
    frozenset({"known_passage", "unknown_entity", "known_entity"}), parse_question,
)
MERGE_QUESTIONS = Step(
    "MergeQuestions", "merge_questions",
    frozenset({"unknown_question", "known_question"}), parse_question,
)
STEPS = (
    UNKNOWN_QUESTION_GEN, KNOWN_EVENTS_GEN, KNOWN_QUESTION_GEN, KNOWN_QUESTION_GEN2, MERGE_QUESTIONS
)


class Sampling(BaseModel):
    """Sampling of every generation call; recorded in run.json so a dataset can be rebuilt."""

    temperature: float = 0.7  # varied wording across events while staying on the prompt
    top_p: float = 0.95
    question_max_tokens: int = 128  # a question is one sentence; this leaves room for a preamble
    passage_max_tokens: int = 384  # "a detailed passage": a few paragraphs

    def for_step(self, step: Step, seed: int) -> dict[str, Any]:
        max_tokens = self.passage_max_tokens if step.long_output else self.question_max_tokens
        return {
            "temperature": self.temperature, "top_p": self.top_p,
            "max_tokens": max_tokens, "seed": seed,
        }


class GenerationError(CuqaError):
    """A step that failed for good: the model call, or output that holds nothing usable."""

    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason


def load_templates() -> dict[str, PromptTemplate]:
    """All five templates, checked now so a broken file fails before any call is paid."""
    return {step.template: load_prompt(step.template, expects=step.placeholders) for step in STEPS}


def _digest(*parts: object) -> bytes:
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()


def event_seed(seed: int, event_id: str) -> int:
    return int.from_bytes(_digest(seed, event_id)[:8], "big")


def candidate_id(seed: int, event_id: str) -> str:
    return f"cq-{_digest(seed, event_id).hex()[:16]}"


@dataclass(frozen=True)
class Draws:
    """Every random number one event needs, drawn in a fixed order before any call."""

    cur_index: int
    aab: bool
    k_fraction: float  # picks k_ent once the passage's entities are known
    api_seed: int


def draw(seed: int, event_id: str, n_entities: int) -> Draws:
    rng = random.Random(event_seed(seed, event_id))
    cur_index = rng.randrange(n_entities)  # = rng.choice(entities)
    aab = rng.randint(1, 9) < 5  # Algorithm 1, line 7: AAB with probability 4/9
    return Draws(cur_index, aab, k_fraction=rng.random(), api_seed=rng.getrandbits(31))


def _same_entity(a: Entity, b: Entity) -> bool:
    names = {n.casefold() for n in (a.text, a.wiki_title) if n}
    return bool(names & {n.casefold() for n in (b.text, b.wiki_title) if n})


async def _both(
    first: Coroutine[Any, Any, PromptCall], second: Coroutine[Any, Any, PromptCall]
) -> tuple[PromptCall, PromptCall]:
    """Run two independent calls together; both finish (and are cached) even if one fails."""
    one, two = await asyncio.gather(first, second, return_exceptions=True)
    for result in (one, two):
        if isinstance(result, BaseException):
            raise result
    return one, two


@dataclass
class Generator:
    gateway: LLMClient
    find_entities: EntityFinder  # NER on a known passage (the ABC branch samples k_ent from it)
    seed: int
    cutoff: str
    sampling: Sampling = field(default_factory=Sampling)
    templates: dict[str, PromptTemplate] = field(default_factory=load_templates)

    @property
    def prompt_hashes(self) -> dict[str, str]:
        return {name: template.sha256 for name, template in self.templates.items()}

    async def call(self, step: Step, values: dict[str, str], api_seed: int) -> PromptCall:
        """One step: ask, parse; unusable text is asked again once with the next seed."""
        template = self.templates[step.template]
        unusable = ""
        for attempt in range(PARSE_ATTEMPTS):
            try:
                result = await self.gateway.chat(prompt_request(
                    template, values, **self.sampling.for_step(step, api_seed + attempt)
                ))
            except LLMError as exc:
                raise GenerationError(step.function, str(exc)) from exc
            try:
                parsed = step.parse(result.text)
            except OutputError as exc:
                unusable = f"{exc} in {PARSE_ATTEMPTS} answers, last: {result.text[:200]!r}"
                continue
            return PromptCall(function=step.function, template_hash=template.sha256,
                              raw=result.text, parsed=parsed)
        raise GenerationError(step.function, unusable)

    async def easy(self, event: Event) -> Candidate:
        """Algorithm 1 for one event (which must have entities)."""
        draws = draw(self.seed, event.id, len(event.entities))
        cur_ent = event.entities[draws.cur_index]
        unknown, passage = await _both(
            self.call(UNKNOWN_QUESTION_GEN,
                      {"unknown_event": event.text, "unknown_entity": cur_ent.text},
                      draws.api_seed),
            self.call(KNOWN_EVENTS_GEN, {"entity": cur_ent.text}, draws.api_seed),
        )
        k_ent, fallback = None, None
        if not draws.aab:
            k_ent = await self._known_entity(passage.parsed, cur_ent, draws.k_fraction)
            if k_ent is None:
                fallback = f"no entity other than {cur_ent.text!r} in the known passage"
        if k_ent is None:
            known = await self.call(
                KNOWN_QUESTION_GEN, {"known_event": passage.parsed, "entity": cur_ent.text},
                draws.api_seed,
            )
        else:
            known = await self.call(
                KNOWN_QUESTION_GEN2,
                {"known_passage": passage.parsed, "unknown_entity": cur_ent.text,
                 "known_entity": k_ent.text},
                draws.api_seed,
            )
        merged = await self.call(
            MERGE_QUESTIONS,
            {"unknown_question": unknown.parsed, "known_question": known.parsed},
            draws.api_seed,
        )
        answer = k_ent or cur_ent
        intermediates = Intermediates(
            branch="AAB" if k_ent is None else "ABC",
            cur_ent=cur_ent,
            k_ent=k_ent,
            known_passage=passage.parsed,
            unknown_question=unknown.parsed,
            known_question=known.parsed,
            known_answer=answer.text,
            merged_question=merged.parsed,
            calls=[unknown, passage, known, merged],
            fallback=fallback,
        )
        return self._candidate(event, answer, intermediates)

    async def _known_entity(self, passage: str, cur_ent: Entity, fraction: float) -> Entity | None:
        pool = [e for e in await self.find_entities(passage) if not _same_entity(e, cur_ent)]
        return pool[int(fraction * len(pool))] if pool else None

    def _candidate(self, event: Event, answer: Entity, steps: Intermediates) -> Candidate:
        branch: QuestionType = steps.branch
        used = {UNKNOWN_QUESTION_GEN, KNOWN_EVENTS_GEN, MERGE_QUESTIONS,
                KNOWN_QUESTION_GEN if branch == "AAB" else KNOWN_QUESTION_GEN2}
        return Candidate(
            id=candidate_id(self.seed, event.id),
            question=steps.merged_question,
            answer=answer.text,
            answer_aliases=answer_aliases(answer),
            type=branch,
            difficulty="easy",
            sub_questions=[
                SubQuestion(question=steps.unknown_question, answer=steps.cur_ent.text,
                            kind="unknown"),
                SubQuestion(question=steps.known_question, answer=steps.known_answer,
                            kind="known"),
            ],
            event=EventRef(id=event.id, date=event.date, text=event.text,
                           source_title=event.source.title, revid=event.source.revid),
            cutoff=self.cutoff,
            generator=GeneratorInfo(
                model=self.gateway.model,
                prompts={s.template: self.templates[s.template].sha256 for s in STEPS if s in used},
            ),
            intermediates=steps,
            seed=self.seed,
        )
