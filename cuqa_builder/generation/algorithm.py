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
from typing import ClassVar

from cuqa_builder.generation.seeding import Draws, candidate_id, draw
from cuqa_builder.generation.steps import (
    DEFAULT_ATTEMPTS,
    KNOWN_EVENTS_GEN,
    KNOWN_QUESTION_GEN,
    KNOWN_QUESTION_GEN2,
    MERGE_QUESTIONS,
    STEPS,
    UNKNOWN_QUESTION_GEN,
    GenerationError,
    Sampling,
    Step,
    StepCheck,
    StepResult,
    ask_step,
    load_templates,
    merge_check,
    own_answer_check,
)
from cuqa_builder.grounding.article_text import with_article
from cuqa_builder.grounding.infobox import Relation
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.llm.client import LLMClient
from cuqa_builder.ner import Token
from cuqa_builder.prompts import PromptTemplate
from cuqa_builder.records.candidates import Candidate, Intermediates, PromptCall
from cuqa_builder.records.events import Entity, Event, Link, answer_aliases
from cuqa_builder.records.items import (
    EventRef,
    Evidence,
    GeneratorInfo,
    KnownSource,
    QuestionType,
    SubQuestion,
)
from cuqa_builder.records.pool import PoolRecord
from cuqa_builder.text import contains_answer
from cuqa_builder.verification.checker import ItemChecker

EntityFinder = Callable[[str], Awaitable[list[Entity]]]
Parser = Callable[[str], Awaitable[list[Token]]]
_NOT_AN_ENTITY = re.compile(r"^[\d\s,–-]+$|^(?:January|February|March|April|May|June|July|August"
                            r"|September|October|November|December) \d{1,2}$")
LINK_LABEL = "LINK"  # label of an entity taken from an article's wikilink
BRIDGE = "Bridges"  # the failure of an event with no entity a recipe can take as bridge



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



def _names(entity: Entity) -> list[str]:
    return [entity.text, *answer_aliases(entity)]



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
        return await ask_step(self.gateway, self.templates[step.template], step, values,
                              self.sampling.for_step, api_seed, self.attempts, check)

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
        return candidate_record(self, event, answer.text, answer_aliases(answer), steps, used)


def candidate_record(
    generator: Generator, event: Event, answer: str, aliases: list[str], steps: Intermediates,
    used: set[Step], item_id: str | None = None,
) -> Candidate:
    """The candidate record of one event's intermediates made by `generator`; `used`: the
    steps it took."""
    branch: QuestionType = steps.branch
    return Candidate(
        id=item_id or candidate_id(generator.seed, event.id),
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
        cutoff=generator.cutoff,
        generator=GeneratorInfo(
            model=generator.gateway.model,
            recipe=generator.recipe,
            known_source=steps.known_source,
            prompts={s.template: generator.templates[s.template].sha256
                     for s in generator.steps if s in used},
        ),
        intermediates=steps,
        seed=generator.seed,
    )
