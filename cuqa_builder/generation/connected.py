"""The connected recipe (`--prompts connected`, the default): items a model can answer only by
learning the event, found in a pool of every bridge and known hop the event allows (issue 33).

The paper's recipe lets the model merge two free-standing questions, and the known question it
writes tends to identify the answer by itself (a shortcut). Here the model writes less and the
structure does the rest, and no event is bet on one bridge and one property:
1. **Describe once**: one request describes every named thing of the event through the news
   (`describing.py`), or says why not (foreseeable, several alike, gives itself away).
2. **Known hops**: each bridge's infobox relations as templated questions (no call), and one
   request for the lasting properties its article's lead links, or with `--known-source model`
   that the generator knew before the cutoff, and a category holding it (`known_facts.py`).
3. **The pool**: every described bridge × each hop, composed and ranked (`pool.py`); the best
   `--pool-size` are screened.
4. **Screen, then verify** (`verification/pooled.py`): the event's masked questions guessed by
   the checker in one request, its whole questions by the model of the cutoff in another; the
   survivors answered with the event in hand in one more. Every question that passes the four
   checks is a candidate; validate keeps the best `--per-event` of each event.
Without a checker while composing (the embedded model, which composes from structure, or
`--check-model none`), the best `--per-event` questions of the pool are the candidates and
validate asks their checks one by one. Every member's fate is kept in `pool.jsonl`.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from cuqa_builder.concurrency import all_finished
from cuqa_builder.generation.algorithm import Generator, Made
from cuqa_builder.generation.bridges import usable
from cuqa_builder.generation.describing import (
    DESCRIBE_BRIDGES,
    THE_EVENT_ITSELF,
    Described,
    description_problem,
    giveaways,
    is_the_event,
    plain_kind,
    read_descriptions,
    without_giveaways,
)
from cuqa_builder.generation.known_facts import (
    KNOWN_FACTS,
    KNOWN_FACTS_MODEL,
    BridgeFacts,
    Hop,
    answer_problem,
    infobox_hops,
    read_facts,
)
from cuqa_builder.generation.pool import Bridge, compose, keep, pointed_to, ranked
from cuqa_builder.generation.pool_screening import EventPool, made, screen
from cuqa_builder.generation.seeding import Draws, draw
from cuqa_builder.generation.steps import MERGE_QUESTIONS, GenerationError, Step
from cuqa_builder.generation.structural import describe_from_parse
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.records.candidates import Candidate, PromptCall
from cuqa_builder.records.events import Entity, Event
from cuqa_builder.records.pool import BridgeTry
from cuqa_builder.verification.checker import cutoff_phrase
from cuqa_builder.verification.names import kind_of, names_of, surface_name

MAX_BRIDGES = 10  # named things of one event described and asked about (the first ones named)
_MAX_LINKS = 30  # linked named things offered as the answers of one bridge's hops
DEFAULT_POOL_SIZE = 12
DEFAULT_PER_EVENT = 2


@dataclass
class ConnectedGenerator(Generator):
    recipe: ClassVar[str] = "connected"
    steps: ClassVar[tuple[Step, ...]] = (
        DESCRIBE_BRIDGES, KNOWN_FACTS, KNOWN_FACTS_MODEL, MERGE_QUESTIONS)  # the merge: hard
    default_known_source: ClassVar = "wiki"
    pool_size: int = DEFAULT_POOL_SIZE  # questions of an event screened, best ranked first
    per_event: int = DEFAULT_PER_EVENT  # without a checker: the candidates kept of an event

    @classmethod
    def bridge_candidates(cls, event: Event, set_aside: Counter[str] | None = None
                          ) -> list[Entity]:
        """Named things only (no demonyms, common nouns, offices, dates), and not the event
        itself: a thing dated the event's year or the topic it is filed under ("2023 Turkish
        presidential election") was scheduled before the cutoff, and describing it by its own
        news gives it away."""
        named = usable(event.entities, set_aside, event.text)
        kept = [e for e in named if not is_the_event(e, event)]
        if set_aside is not None and len(kept) < len(named):
            set_aside[THE_EVENT_ITSELF] += len(named) - len(kept)
        return kept

    async def easy(self, event: Event) -> Candidate:
        raise TypeError("the connected recipe makes all the items of an event at once: make()")

    async def make(self, event: Event) -> Made:
        """One event's candidates (`make_many` of one event)."""
        [made] = await self.make_many([event])
        if isinstance(made, GenerationError):
            raise made
        return made

    async def make_many(self, events: Sequence[Event]) -> list[Made | GenerationError]:
        """The candidates of each event: the questions of its pool that pass the checker's
        checks (all of them; validate keeps the best), or without a checker the best
        `per_event`; or why it has none (a `GenerationError` with the pool). The pools of all
        `events` are screened together, their questions dealt across requests."""
        pools = await asyncio.gather(*(self._prepared(event) for event in events))
        ready = [pool for pool in pools if isinstance(pool, EventPool)]
        if self.checker is None:
            for pool in ready:
                pool.kept = keep(pool.screened, self.per_event)
                pool.outcome = {d.id: "kept (not checked while composing: validate asks the "
                                "checks)" if d in pool.kept else "not kept (another bridge or "
                                "property ranked higher)" for d in pool.screened}
        else:
            await screen(self, ready)
        return [pool if isinstance(pool, GenerationError) else made(self, pool)
                for pool in pools]

    async def _prepared(self, event: Event) -> EventPool | GenerationError:
        """The event's pool, described, composed and ranked; the error that stopped it."""
        pool = EventPool(event)
        try:
            bridges = [self._bridge(e) for e in self._bridge_pool(event)[:MAX_BRIDGES]]
            draws = draw(self.seed, event.id, len(bridges))
            await self._fill(pool, bridges, draws)
        except GenerationError as exc:
            exc.attempts = [*pool.calls, *exc.attempts]
            return exc
        pool.screened = ranked(pool.drafts)[: self.pool_size]
        return pool

    def _bridge(self, entity: Entity) -> Bridge:
        """The bridge; its kind from its article's infobox when there is one, else NER's."""
        article = self.known_articles.get(entity_key(entity))
        clean = entity.model_copy(update={"text": surface_name(entity.text)})
        kind = (plain_kind(article.kind) or article.kind) if article and article.kind \
            else kind_of(entity)
        return Bridge(clean, entity_key(entity), names_of(entity), kind, article)

    async def _fill(self, pool: EventPool, bridges: list[Bridge], draws: Draws) -> None:
        """Describe the bridges and find their hops (two requests, asked together), then
        compose every described bridge with each of its hops."""
        describing: list[PromptCall] = []  # each request's calls, kept in a fixed order
        facts: list[PromptCall] = []
        try:
            described, hops = await all_finished(
                self._describe(pool, bridges, draws, describing),
                self._hops(pool, bridges, draws, facts))
        finally:
            pool.calls += describing + facts
        pointed = pointed_to(pool.event, self.known_articles)
        for bridge, said, own in zip(bridges, described, hops, strict=True):
            pool.tries.append(BridgeTry(entity=bridge.entity, kind=bridge.kind,
                                        description=said.description, set_aside=said.set_aside))
            if said.description is None:
                continue
            for hop in own:
                draft = compose(self.seed, pool.event, bridge, said.description, hop,
                                self.known_articles, pointed)
                if isinstance(draft, str):
                    pool.refused.append(f"{bridge.entity.text}: {draft}")
                elif all(d.id != draft.id for d in pool.drafts):
                    pool.drafts.append(draft)

    async def _describe(self, pool: EventPool, bridges: list[Bridge], draws: Draws,
                        spent: list[PromptCall]) -> list[Described]:
        """Each bridge's description: from the parse for a small model, else the model's (one
        request), the parse standing in for one the checks refused."""
        if self.structure_first:
            return [await self._parsed(pool.event, b) for b in bridges]
        result = await self._ask(spent, DESCRIBE_BRIDGES, {
            "event": pool.event.text, "date": f"{pool.event.date:%-d %B %Y}",
            "bridges": "\n".join(f"B{n}. {b.entity.text}" for n, b in enumerate(bridges, 1)),
            "cutoff": cutoff_phrase(self.cutoff),
        }, draws)
        said = read_descriptions(result, [b.entity for b in bridges], pool.event,
                                 self.known_articles)
        for i, (bridge, one) in enumerate(zip(bridges, said, strict=True)):
            if one.set_aside and one.set_aside.startswith("refused"):
                parsed = await self._parsed(pool.event, bridge)
                said[i] = parsed if parsed.description else one
        return said

    async def _parsed(self, event: Event, bridge: Bridge) -> Described:
        """The bridge described by the event sentence's parse, when its role allows and the
        description passes its check; a name in it that gives the bridge away is said by its
        kind ("the town of Lahaina" -> "a town")."""
        none = Described(set_aside="the event's first sentence gives no description of it (it "
                         "is not a place, the subject or the object of its verb)")
        found = next((m for name in bridge.names if (m := re.search(
            rf"(?<!\w){re.escape(name)}(?!\w)", event.text))), None)
        if self.parse is None or found is None:
            return none
        tokens = await self.parse(event.text)
        phrase = describe_from_parse(tokens, found.start(), found.end(), bridge.kind,
                                     f"{event.date:%B %Y}")
        if phrase is not None:
            phrase = without_giveaways(
                phrase, giveaways(phrase, bridge.entity, event, self.known_articles), event,
                self.known_articles)
        if phrase is None or description_problem(phrase, bridge.names, event):
            return none
        return Described(description=phrase)

    async def _hops(self, pool: EventPool, bridges: list[Bridge], draws: Draws,
                    spent: list[PromptCall]) -> list[list[Hop]]:
        """Each bridge's hops: its infobox's (no call), and the generator's (one request)
        unless the model is small."""
        facts = [self._facts(b) for b in bridges]
        hops: list[list[Hop]] = []
        for bridge, one in zip(bridges, facts, strict=True):
            found, refused = infobox_hops(bridge.article, one, pool.event)
            hops.append(found)
            pool.refused += refused
        if self.structure_first:
            return hops
        wiki = self.known_source == "wiki"
        result = await self._ask(spent, KNOWN_FACTS if wiki else KNOWN_FACTS_MODEL, {
            "event": pool.event.text, "date": f"{pool.event.date:%-d %B %Y}",
            "things": "\n\n".join(self._thing(n, b, f, pool.event) for n, (b, f) in
                                  enumerate(zip(bridges, facts, strict=True), 1)),
            "cutoff": cutoff_phrase(self.cutoff),
        }, draws)
        written, refused = read_facts(result, facts, pool.event, "article" if wiki else "model")
        pool.refused += refused
        for own, more in zip(hops, written, strict=True):
            asked = {h.question for h in own}
            own += [h for h in more if h.question is None or h.question not in asked]
        return hops

    def _facts(self, bridge: Bridge) -> BridgeFacts:
        """What the bridge's hops are checked against; the answers its article links."""
        links: list[Entity] = []
        if bridge.article is not None:
            links = self._linked_entities(bridge.article.passage, bridge.entity)
        written = bridge.article.as_written(bridge.entity.text) if bridge.article \
            else bridge.entity.text
        return BridgeFacts(bridge.entity, bridge.names, bridge.kind, links, written)

    def _thing(self, number: int, bridge: Bridge, facts: BridgeFacts, event: Event) -> str:
        """One named thing as the known-facts prompt lists it."""
        if bridge.article is None or self.known_source == "model":
            return f"T{number}. {bridge.entity.text}"
        answers = [e.text for e in facts.links
                   if answer_problem(e, facts, event) is None][:_MAX_LINKS]
        return (f"T{number}. {bridge.article.as_written(bridge.entity.text)}\n"
                f"Article: {bridge.article.passage}\n"
                f"Links: {'; '.join(answers) or 'none'}")

    async def _ask(self, spent: list[PromptCall], step: Step, values: dict[str, str],
                   draws: Draws) -> str:
        """One request of the event, its reply's parse (every attempt kept in `spent`)."""
        try:
            result = await self.call(step, values, draws.api_seed)
        except GenerationError as exc:
            spent += exc.attempts
            exc.attempts = []
            raise
        spent += result.attempts
        return result.parsed
