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
from dataclasses import dataclass, field
from typing import ClassVar

from cuqa_builder.concurrency import all_finished
from cuqa_builder.generation.algorithm import (
    MERGE_QUESTIONS,
    GenerationError,
    Generator,
    Made,
    Step,
    load_prompt,
)
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
    INFOBOX_QUESTIONS,
    KNOWN_FACTS,
    KNOWN_FACTS_MODEL,
    BridgeFacts,
    Hop,
    answer_problem,
    infobox_hops,
    read_facts,
)
from cuqa_builder.generation.pool import (
    Bridge,
    Draft,
    compose,
    keep,
    pointed_to,
    ranked,
    unknown_question,
)
from cuqa_builder.generation.seeding import Draws, draw
from cuqa_builder.generation.structural import describe_from_parse
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.llm.types import LLMError
from cuqa_builder.records import (
    BridgeTry,
    Candidate,
    CheckerVerdict,
    Entity,
    Event,
    Intermediates,
    PoolMember,
    PoolRecord,
    PromptCall,
)
from cuqa_builder.verification.checker import (
    CHECKER_TEMPLATES,
    cutoff_phrase,
    failure_check,
    failure_reason,
)
from cuqa_builder.verification.names import kind_of, names_of, surface_name
from cuqa_builder.verification.pooled import POOLED_TEMPLATES, PooledChecker, PooledQuestion

MAX_BRIDGES = 10  # named things of one event described and asked about (the first ones named)
_MAX_LINKS = 30  # linked named things offered as the answers of one bridge's hops
DEFAULT_POOL_SIZE = 12
DEFAULT_PER_EVENT = 2
POOL = "Pool"  # the step an event without a surviving question fails at


@dataclass
class _EventPool:
    """One event's pool as it is built: its bridges' fates, drafts, refusals and calls, the
    questions screened and what became of each."""

    event: Event
    tries: list[BridgeTry] = field(default_factory=list)
    drafts: list[Draft] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    calls: list[PromptCall] = field(default_factory=list)
    verdicts: dict[str, list[CheckerVerdict]] = field(default_factory=dict)
    screened: list[Draft] = field(default_factory=list)
    kept: list[Draft] = field(default_factory=list)
    outcome: dict[str, str] = field(default_factory=dict)
    failure: GenerationError | None = None  # the checks could not be asked

    def record(self, seed: int) -> PoolRecord:
        members = [PoolMember(
            id=d.id, bridge=d.bridge.entity.text, property=d.hop.property,
            known_from=d.hop.known_from, branch=d.branch, known_question=d.known_question,
            answer=d.answer, question=d.question, masked_question=d.masked, rank=d.rank,
            verdicts=self.verdicts.get(d.id, []), outcome=self.outcome.get(
                d.id, f"not screened (ranked {i + 1}; --pool-size {len(self.screened)})"),
        ) for i, d in enumerate(self.drafts)]
        return PoolRecord(event_id=self.event.id, seed=seed, bridges=self.tries,
                          members=members, refused=self.refused, calls=self.calls)


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
        ready = [pool for pool in pools if isinstance(pool, _EventPool)]
        if self.checker is None:
            for pool in ready:
                pool.kept = keep(pool.screened, self.per_event)
                pool.outcome = {d.id: "kept (not checked while composing: validate asks the "
                                "checks)" if d in pool.kept else "not kept (another bridge or "
                                "property ranked higher)" for d in pool.screened}
        else:
            await self._screen(ready)
        return [pool if isinstance(pool, GenerationError) else self._made(pool)
                for pool in pools]

    async def _prepared(self, event: Event) -> _EventPool | GenerationError:
        """The event's pool, described, composed and ranked; the error that stopped it."""
        pool = _EventPool(event)
        try:
            bridges = [self._bridge(e) for e in self._bridge_pool(event)[:MAX_BRIDGES]]
            draws = draw(self.seed, event.id, len(bridges))
            await self._fill(pool, bridges, draws)
        except GenerationError as exc:
            exc.attempts = [*pool.calls, *exc.attempts]
            return exc
        pool.screened = ranked(pool.drafts)[: self.pool_size]
        return pool

    def _made(self, pool: _EventPool) -> Made | GenerationError:
        record = pool.record(self.seed)
        failure = pool.failure or (None if pool.kept else GenerationError(POOL, _why_none(record)))
        if failure is not None:
            failure.attempts, failure.pool = pool.calls, record
            return failure
        items = [self._candidate(pool.event, d, pool, first=i == 0)
                 for i, d in enumerate(pool.kept)]
        return Made(items, record)

    def _bridge(self, entity: Entity) -> Bridge:
        """The bridge; its kind from its article's infobox when there is one, else NER's."""
        article = self.known_articles.get(entity_key(entity))
        clean = entity.model_copy(update={"text": surface_name(entity.text)})
        kind = (plain_kind(article.kind) or article.kind) if article and article.kind \
            else kind_of(entity)
        return Bridge(clean, entity_key(entity), names_of(entity), kind, article)

    async def _fill(self, pool: _EventPool, bridges: list[Bridge], draws: Draws) -> None:
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

    async def _describe(self, pool: _EventPool, bridges: list[Bridge], draws: Draws,
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

    async def _hops(self, pool: _EventPool, bridges: list[Bridge], draws: Draws,
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

    async def _screen(self, pools: list[_EventPool]) -> None:
        """The checks of every screened question of `pools`: their guesses (the masked
        questions to the checker, the whole ones to the model of the cutoff), then the open
        book for those no guess answered, each check's questions dealt across requests. Each
        pool gets its verdicts, its share of the calls, its survivors (best first) and each
        question's outcome."""
        assert self.checker is not None
        checks = PooledChecker(self.checker.client, self.cutoff, self.checker.counted,
                               self.checker.guesser, seed=self.seed)
        owner = {d.id: pool for pool in pools for d in pool.screened}
        questions = [_pooled(d, pool.event) for pool in pools for d in pool.screened]
        try:
            found = await checks.guesses(questions)
            left = [q for q in questions if _passed(found.verdicts[q.key])]
            found.add(await checks.open_book(left))
        except LLMError as exc:
            self._unasked(pools, exc)
            return
        for key, verdicts in found.verdicts.items():
            owner[key].verdicts[key] = verdicts
        for key, calls in found.calls.items():
            owner[key].calls += calls
        for pool in pools:
            pool.outcome = {d.id: _outcome(pool.verdicts[d.id]) for d in pool.screened}
            pool.kept = [d for d in pool.screened if pool.outcome[d.id] == SURVIVED]

    def _unasked(self, pools: list[_EventPool], exc: LLMError) -> None:
        """Every pool fails when a checking model could not be asked (its checks measured
        nothing); a re-run asks again what the cache does not hold."""
        assert self.checker is not None
        guesser = self.checker.guesser
        model = exc.model or self.checker.client.model
        who = (f"the probe model {model} (a model of the cutoff)"
               if guesser is not None and model == guesser.model else f"the checker {model}")
        for pool in pools:
            if not pool.screened:
                continue
            failure = GenerationError("Check", f"{who} could not be asked while composing: {exc}")
            failure.unasked = who
            failure.__cause__ = exc
            pool.failure = failure

    def _candidate(self, event: Event, draft: Draft, pool: _EventPool, first: bool
                   ) -> Candidate:
        """A surviving question as a candidate; the event's calls are on its first one."""
        bridge, hop = draft.bridge, draft.hop
        article = bridge.article
        steps = Intermediates(
            branch=draft.branch, cur_ent=bridge.entity, k_ent=hop.answer,
            known_passage=_background(bridge, [hop]),
            unknown_question=unknown_question(bridge.kind, draft.description),
            known_question=draft.known_question, known_answer=draft.answer,
            merged_question=draft.question, calls=pool.calls if first else [],
            known_source=self.known_source,
            known_article=article.evidence if article and self.known_source == "wiki" else None,
            bridge_description=draft.description, category=hop.category,
            masked_question=draft.masked, known_from=hop.known_from,
            rank=draft.rank, screening=pool.verdicts.get(draft.id, []),
        )
        used = {DESCRIBE_BRIDGES} if not self.structure_first else set()
        if hop.known_from != "infobox":
            used.add(KNOWN_FACTS if self.known_source == "wiki" else KNOWN_FACTS_MODEL)
        item = self.candidate(event, draft.answer, draft.aliases, steps, used, item_id=draft.id)
        item.property = hop.property
        asked = {call.template_hash for call in pool.calls}
        if draft.id in pool.verdicts:  # checked with the events beside it: their requests
            asked |= {load_prompt(name).sha256 for name in POOLED_TEMPLATES}
        for name in (*CHECKER_TEMPLATES, *POOLED_TEMPLATES,
                     *((INFOBOX_QUESTIONS,) if hop.known_from == "infobox" else ())):
            template = load_prompt(name)
            if name == INFOBOX_QUESTIONS or template.sha256 in asked:
                item.generator.prompts[name] = template.sha256
        return item


SURVIVED = "survived"


def _passed(verdicts: list[CheckerVerdict]) -> bool:
    return all(v.passed for v in verdicts)


def _outcome(verdicts: list[CheckerVerdict]) -> str:
    failed = next((v for v in verdicts if not v.passed), None)
    if failed is None:
        return SURVIVED
    return f"{failure_check(failed)}: {failure_reason(failed)}"


def _background(bridge: Bridge, hops: list[Hop]) -> str:
    """What was known of the bridge at the cutoff, for the open book: its article's lead, and
    the infobox rows its hops ask (the lead may not say them)."""
    lead = bridge.article.passage if bridge.article else ""
    rows = "; ".join(f"{h.property}: {h.answer.text}" for h in hops
                     if h.known_from in ("infobox", "model") and h.answer is not None)
    said = " ".join(part for part in (lead, f"({rows})" if rows else "") if part)
    return f"{bridge.entity.text}: {said}" if said else bridge.entity.text


def _pooled(draft: Draft, event: Event) -> PooledQuestion:
    names = (draft.answer, *draft.aliases)
    return PooledQuestion(
        key=draft.id, question=draft.question, masked=draft.masked, names=names,
        bridges=tuple(draft.bridge.names), passage=_background(draft.bridge, [draft.hop]),
        event=event, bridge=f"{event.id} {draft.bridge.key}")


def _why_none(record: PoolRecord) -> str:
    """Why an event's pool gave no candidate, counted: bridges set aside, questions failed by
    each check."""
    described = sum(t.description is not None for t in record.bridges)
    if not record.members:
        reasons = Counter(re.sub(r":.*", "", t.set_aside or "") for t in record.bridges
                          if t.description is None)
        why = "; ".join(f"{n} {r}" for r, n in reasons.most_common())
        return (f"no question to ask: {described} of {len(record.bridges)} named things "
                f"described ({why or 'none set aside'}), no known hop for "
                + ("them" if described else "any"))
    failed = Counter(m.outcome.split(":", 1)[0] for m in record.members)
    return (f"none of the {len(record.members)} questions of {described} described named "
            f"things passed: " + "; ".join(f"{n} {why}" for why, n in failed.most_common()))

