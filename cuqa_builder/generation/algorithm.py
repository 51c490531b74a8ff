"""Algorithm 1 of the Self-DC paper (section 3.1): one unknown event -> one CuQA candidate.

Every random choice for an event is drawn up front from a generator seeded by the run's seed and
the event id, so the same event makes the same choices whatever `--limit`, order or resumption;
the same choices give the same prompts and sampling seed, so a re-run is served by the cache.

Repair: the checks that apply to a step's output run as soon as it is there (no question at all,
a question naming its own answer, a merge that gives the bridge away or repeats one input). A
refused output is asked again with the next sampling seed (a new cache key), up to `attempts`
times; later steps only run on an accepted output, and every attempt is kept.

With `known_source="wiki"` the known passage is the lead of the bridge's article as it was at
the cutoff (given by the stage; generation does no I/O) and `k_ent` is one of the lead's links.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from cuqa_builder.errors import CuqaError
from cuqa_builder.generation.output_parsing import OutputError, parse_passage, parse_question
from cuqa_builder.generation.seeding import Draws, candidate_id, draw
from cuqa_builder.grounding.article_text import with_article
from cuqa_builder.grounding.infobox import Relation
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.llm.client import LLMClient, prompt_request
from cuqa_builder.llm.types import LLMError
from cuqa_builder.ner import Token
from cuqa_builder.prompts import PromptTemplate, load_prompt
from cuqa_builder.records import (
    Candidate,
    Entity,
    Event,
    EventRef,
    Evidence,
    GeneratorInfo,
    Intermediates,
    KnownSource,
    Link,
    PoolRecord,
    PromptCall,
    QuestionType,
    SubQuestion,
    answer_aliases,
)
from cuqa_builder.similarity import SIMILAR, wording_similarity
from cuqa_builder.text import contains_answer
from cuqa_builder.verification.checker import ItemChecker
from cuqa_builder.verification.question_form import form_problem

EntityFinder = Callable[[str], Awaitable[list[Entity]]]
Parser = Callable[[str], Awaitable[list[Token]]]
# A refused reply is asked again with the next sampling seed (a new cache key); refused replies
# stay cached, so a re-run reproduces the same outcome for free.
DEFAULT_ATTEMPTS = 3
_NOT_AN_ENTITY = re.compile(r"^[\d\s,–-]+$|^(?:January|February|March|April|May|June|July|August"
                            r"|September|October|November|December) \d{1,2}$")
LINK_LABEL = "LINK"  # label of an entity taken from an article's wikilink
# What a repair adds to the prompt of a step with `feedback`.
REFUSED = "\n\nYour previous reply was refused: {reason}. Reply again, keeping to every rule."
BRIDGE = "Bridges"  # the failure of an event with no entity a recipe can take as bridge
# A step check: the parsed output -> why it is refused, or None to accept it.
StepCheck = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Step:
    """One function of Algorithm 1: its template, the placeholders it must have, its parser."""

    function: str
    template: str
    placeholders: frozenset[str]
    parse: Callable[[str], str]
    long_output: bool = False
    # A repair tells the model why its last reply was refused (the paper's steps are asked
    # again as they were, with the next seed: their requests stay the paper's).
    feedback: bool = False


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
    """A step that failed for good: the model call, or every attempt refused by its check."""

    def __init__(self, step: str, reason: str, attempts: list[PromptCall] | None = None) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason
        self.attempts = list(attempts or [])
        self.branch: QuestionType | None = None
        self.pool: PoolRecord | None = None  # the connected recipe: what the event's pool held
        self.unasked: str | None = None  # the checking model (by its role) that failed to answer


@dataclass(frozen=True)
class KnownArticle:
    """An entity's article at the cutoff, as `--known-source wiki` uses it."""

    passage: str  # the lead's first sentences
    links: list[Link]  # the lead's links: where k_ent is sampled
    evidence: Evidence
    kind: str | None = None  # what its infobox says the entity is ("island", "company")
    # the infobox's relations whose first value the article's text names too
    relations: list[Relation] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # the lead's bold names of the entity
    definite: frozenset[str] = frozenset()  # the names English writes with "the"
    size: int = 0  # characters of its text at the cutoff: long articles are of famous things

    def as_written(self, name: str) -> str:
        """`name` as the article writes it: "the United Kingdom"."""
        return with_article(name, self.definite)


@dataclass(frozen=True)
class Made:
    """What one event gave: its items (the paper's recipe makes one), and the connected
    recipe's pool they came from."""

    items: list[Candidate]
    pool: PoolRecord | None = None


@dataclass(frozen=True)
class StepResult:
    """Every attempt of one step, the accepted one last."""

    attempts: list[PromptCall]

    @property
    def parsed(self) -> str:
        return self.attempts[-1].parsed


def _names(entity: Entity) -> list[str]:
    return [entity.text, *answer_aliases(entity)]


def names_found(text: str, names: list[str]) -> str | None:
    """The first of `names` that `text` contains as whole words (normalised), if any."""
    return next((name for name in names if contains_answer(text, name)), None)


def own_answer_check(what: str, answer: list[str], bridge: list[str] | None = None) -> StepCheck:
    """A sub-question must read as one question, not name its own answer, and (an ABC known
    question) name the bridge."""

    def check(question: str) -> str | None:
        if problem := form_problem(question):
            return f"the {what}: {problem}"
        if found := names_found(question, answer):
            return f"the {what} names its own answer {found!r}"
        if bridge is not None and not names_found(question, bridge):
            return f"the {what} does not mention the bridge {bridge[0]!r}"
        return None

    return check


def merge_check(answer: list[str], bridge: list[str], inputs: list[str]) -> StepCheck:
    """A merged question must hide the answer and the bridge and join both inputs."""

    def check(question: str) -> str | None:
        if problem := form_problem(question):
            return f"the merged question: {problem}"
        if found := names_found(question, answer):
            return f"the merged question names the answer {found!r}"
        if found := names_found(question, bridge):
            return f"the merged question names the bridge {found!r}"
        if any(wording_similarity(question, q) >= SIMILAR for q in inputs):
            return "the merged question only repeats or rewords one of its two questions"
        return None

    return check


def load_templates(steps: tuple[Step, ...] = STEPS) -> dict[str, PromptTemplate]:
    """The steps' templates (the paper's five by default), checked now so a broken file fails
    before any call is paid."""
    return {step.template: load_prompt(step.template, expects=step.placeholders) for step in steps}


def same_entity(a: Entity, b: Entity) -> bool:
    """The same names, or one named inside the other ("Turkey" in "Grand National Assembly of
    Turkey": a question mentioning the bridge would name the answer)."""
    names = [n for n in (a.text, a.wiki_title) if n]
    others = [n for n in (b.text, b.wiki_title) if n]
    return any(contains_answer(x, y) or contains_answer(y, x) for x in names for y in others)


@dataclass
class Generator:
    """A recipe: one unknown event -> one candidate. This class is the paper's Algorithm 1
    (`--prompts paper`); `generation/recipes.py` names the others."""

    recipe: ClassVar[str] = "paper"
    steps: ClassVar[tuple[Step, ...]] = STEPS
    default_known_source: ClassVar[KnownSource] = "model"

    gateway: LLMClient
    find_entities: EntityFinder  # NER on a known passage (the ABC branch samples k_ent from it)
    seed: int
    cutoff: str
    sampling: Sampling = field(default_factory=Sampling)
    templates: dict[str, PromptTemplate] = field(default_factory=dict)  # default: the steps'
    attempts: int = DEFAULT_ATTEMPTS
    known_source: KnownSource | None = None  # default: the recipe's
    # entity_key(entity) -> its article at the cutoff, for --known-source wiki
    known_articles: dict[str, KnownArticle] = field(default_factory=dict)
    parse: Parser | None = None  # an event sentence's parse, for recipes that build on it
    # Build from structure (the parse, the infobox) before asking the model: for a small model,
    # whose own wording is refused or wrong far more often than not, at seconds a try.
    structure_first: bool = False
    # The checker's checks, asked as soon as an item is composed so that a failing bridge is
    # replaced (recipes that compose several tries); None: not asked while composing.
    checker: ItemChecker | None = None

    def __post_init__(self) -> None:
        self.templates = self.templates or load_templates(self.steps)
        self.known_source = self.known_source or self.default_known_source

    @property
    def prompt_hashes(self) -> dict[str, str]:
        return {name: template.sha256 for name, template in self.templates.items()}

    async def call(
        self, step: Step, values: dict[str, str], api_seed: int, check: StepCheck | None = None
    ) -> StepResult:
        """One step: ask, parse, check; a refused output is asked again with the next seed."""
        template = self.templates[step.template]
        attempts: list[PromptCall] = []
        for attempt in range(self.attempts):
            seed = api_seed + attempt
            request = prompt_request(template, values, **self.sampling.for_step(step, seed))
            if step.feedback and attempts:
                request.messages[-1]["content"] += REFUSED.format(reason=attempts[-1].rejected)
            try:
                result = await self.gateway.chat(request)
            except LLMError as exc:
                raise GenerationError(step.function, str(exc), attempts) from exc
            try:
                parsed, refused = step.parse(result.text), None
            except OutputError as exc:
                parsed, refused = "", str(exc)
            if refused is None and check is not None:
                refused = check(parsed)
            attempts.append(PromptCall(
                function=step.function, template_hash=template.sha256, raw=result.text,
                parsed=parsed, attempt=attempt, seed=seed, rejected=refused,
                prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
            ))
            if refused is None:
                return StepResult(attempts)
        last = attempts[-1]
        raise GenerationError(
            step.function,
            f"{last.rejected} in {len(attempts)} attempts, last: {last.raw[:200]!r}", attempts,
        )

    @classmethod
    def bridge_candidates(cls, event: Event, set_aside: Counter[str] | None = None
                          ) -> list[Entity]:
        """The entities a recipe may take as the bridge (the paper: all of them); `set_aside`
        counts the others by reason."""
        return event.entities

    def _bridge_pool(self, event: Event) -> list[Entity]:
        """The entities cur_ent is drawn from: the candidates, or with wiki passages those with
        an article."""
        set_aside: Counter[str] = Counter()
        candidates = self.bridge_candidates(event, set_aside)
        if not candidates:  # only demonyms, dates, offices...: nothing to draw from
            reasons = "; ".join(f"{n} {reason}" for reason, n in set_aside.items())
            raise GenerationError(BRIDGE, f"no entity of the event can be a bridge: {reasons}")
        if self.known_source == "model":
            return candidates
        pool = [e for e in candidates if entity_key(e) in self.known_articles]
        if not pool:
            raise GenerationError(
                "KnownEventsGen", "no entity of the event had a Wikipedia article at the cutoff"
            )
        return pool

    async def _passage(self, cur_ent: Entity, api_seed: int) -> tuple[str, list[PromptCall]]:
        if self.known_source == "wiki":
            return self.known_articles[entity_key(cur_ent)].passage, []
        result = await self.call(KNOWN_EVENTS_GEN, {"entity": cur_ent.text}, api_seed)
        return result.parsed, result.attempts

    async def make(self, event: Event) -> Made:
        """The items of one event (which must have entities)."""
        return Made([await self.easy(event)])

    async def easy(self, event: Event) -> Candidate:
        """Algorithm 1 for one event (which must have entities)."""
        pool = self._bridge_pool(event)
        draws = draw(self.seed, event.id, len(pool))
        spent: list[PromptCall] = []  # accepted steps' calls, for the failure record
        try:
            return await self._easy(event, pool[draws.cur_index], draws, spent)
        except GenerationError as exc:
            exc.branch = "AAB" if draws.aab else "ABC"  # the branch drawn, for the yield
            exc.attempts = [*spent, *exc.attempts]
            raise

    async def _easy(
        self, event: Event, cur_ent: Entity, draws: Draws, spent: list[PromptCall]
    ) -> Candidate:
        unknown_call = self.call(
            UNKNOWN_QUESTION_GEN, {"unknown_event": event.text, "unknown_entity": cur_ent.text},
            draws.api_seed, own_answer_check("unknown question", _names(cur_ent)),
        )
        # The two independent steps run together; both finish (and are cached, and counted in
        # a failure's calls) even if one fails.
        unknown_or_error, passage_or_error = await asyncio.gather(
            unknown_call, self._passage(cur_ent, draws.api_seed), return_exceptions=True
        )
        if not isinstance(unknown_or_error, BaseException):
            spent += unknown_or_error.attempts
        if not isinstance(passage_or_error, BaseException):
            spent += passage_or_error[1]
        for outcome in (unknown_or_error, passage_or_error):
            if isinstance(outcome, BaseException):
                raise outcome
        assert not isinstance(unknown_or_error, BaseException)
        assert not isinstance(passage_or_error, BaseException)
        unknown, (passage, _) = unknown_or_error, passage_or_error
        k_ent, fallback = None, None
        if not draws.aab:
            k_ent = await self._known_entity(passage, cur_ent, draws.k_fraction)
            if k_ent is None:
                fallback = f"no entity other than {cur_ent.text!r} in the known passage"
        if k_ent is None:
            known = await self.call(
                KNOWN_QUESTION_GEN, {"known_event": passage, "entity": cur_ent.text},
                draws.api_seed, own_answer_check("known question", _names(cur_ent)),
            )
        else:
            known = await self.call(
                KNOWN_QUESTION_GEN2,
                {"known_passage": passage, "unknown_entity": cur_ent.text,
                 "known_entity": k_ent.text},
                draws.api_seed,
                own_answer_check("known question", _names(k_ent), bridge=_names(cur_ent)),
            )
        spent += known.attempts
        answer = k_ent or cur_ent
        merged = await self.call(
            MERGE_QUESTIONS,
            {"unknown_question": unknown.parsed, "known_question": known.parsed},
            draws.api_seed,
            merge_check(_names(answer), _names(cur_ent) if k_ent else [],
                        [unknown.parsed, known.parsed]),
        )
        article = self.known_articles.get(entity_key(cur_ent))
        intermediates = Intermediates(
            branch="AAB" if k_ent is None else "ABC",
            cur_ent=cur_ent,
            k_ent=k_ent,
            known_passage=passage,
            unknown_question=unknown.parsed,
            known_question=known.parsed,
            known_answer=answer.text,
            merged_question=merged.parsed,
            calls=[*spent, *merged.attempts],
            fallback=fallback,
            known_source=self.known_source,
            known_article=article.evidence if article and self.known_source == "wiki" else None,
        )
        return self._candidate(event, answer, intermediates)

    async def _known_entity(self, passage: str, cur_ent: Entity, fraction: float) -> Entity | None:
        if self.known_source == "wiki":
            found = self._linked_entities(passage, cur_ent)
        else:
            found = await self.find_entities(passage)
        pool = [e for e in found if not same_entity(e, cur_ent)]
        return pool[int(fraction * len(pool))] if pool else None

    def _linked_entities(self, passage: str, cur_ent: Entity) -> list[Entity]:
        """The lead's links shown in the passage (no dates or numbers): titles known exactly."""
        links = self.known_articles[entity_key(cur_ent)].links
        entities = [
            Entity(text=link.text, label=LINK_LABEL, wiki_title=link.title) for link in links
            if link.text in passage and not _NOT_AN_ENTITY.match(link.title)
            and not _NOT_AN_ENTITY.match(link.text)
        ]
        return list({e.wiki_title: e for e in entities}.values())

    def _candidate(self, event: Event, answer: Entity, steps: Intermediates) -> Candidate:
        used = {UNKNOWN_QUESTION_GEN, MERGE_QUESTIONS,
                KNOWN_QUESTION_GEN if steps.branch == "AAB" else KNOWN_QUESTION_GEN2}
        if steps.known_source == "model":
            used.add(KNOWN_EVENTS_GEN)
        return self.candidate(event, answer.text, answer_aliases(answer), steps, used)

    def candidate(
        self, event: Event, answer: str, aliases: list[str], steps: Intermediates,
        used: set[Step], item_id: str | None = None,
    ) -> Candidate:
        """The candidate record of one event's intermediates; `used`: the steps it took."""
        branch: QuestionType = steps.branch
        return Candidate(
            id=item_id or candidate_id(self.seed, event.id),
            question=steps.merged_question,
            answer=answer,
            answer_aliases=aliases,
            type=branch,
            difficulty="easy",
            sub_questions=[
                SubQuestion(question=steps.unknown_question, answer=steps.cur_ent.text,
                            kind="unknown"),
                SubQuestion(question=steps.known_question, answer=steps.known_answer,
                            kind="known"),
            ],
            event=EventRef(id=event.id, date=event.date, text=event.text,
                           source_title=event.source.title, revid=event.source.revid,
                           category=event.category),
            cutoff=self.cutoff,
            generator=GeneratorInfo(
                model=self.gateway.model,
                recipe=self.recipe,
                known_source=steps.known_source,
                prompts={s.template: self.templates[s.template].sha256
                         for s in self.steps if s in used},
            ),
            intermediates=steps,
            seed=self.seed,
        )
