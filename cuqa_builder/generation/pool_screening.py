"""The connected recipe's pools screened (`connected.py` builds them): every screened question's
checks asked while composing, each event's pools with those of the events beside it
(`verification/pooled.py`), the survivors kept best first and every member's fate recorded for
`pool.jsonl`; a checking model that could not be asked fails every pool; the survivors become
candidates."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from cuqa_builder.generation.algorithm import Generator, Made, candidate_record
from cuqa_builder.generation.describing import DESCRIBE_BRIDGES
from cuqa_builder.generation.known_facts import (
    INFOBOX_QUESTIONS,
    KNOWN_FACTS,
    KNOWN_FACTS_MODEL,
    Hop,
)
from cuqa_builder.generation.pool import Bridge, Draft, unknown_question
from cuqa_builder.generation.steps import GenerationError
from cuqa_builder.llm.types import LLMError
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records.candidates import Candidate, CheckerVerdict, Intermediates, PromptCall
from cuqa_builder.records.events import Event
from cuqa_builder.records.pool import BridgeTry, PoolMember, PoolRecord
from cuqa_builder.verification.checker import CHECKER_TEMPLATES, failure_check, failure_reason
from cuqa_builder.verification.pooled import POOLED_TEMPLATES, PooledChecker, PooledQuestion

POOL = "Pool"  # the step an event without a surviving question fails at
SURVIVED = "survived"


@dataclass
class EventPool:
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


def made(generator: Generator, pool: EventPool) -> Made | GenerationError:
    """The event's candidates (the questions it kept) with its pool record, or why it has
    none (a `GenerationError` with the record)."""
    record = pool.record(generator.seed)
    failure = pool.failure or (None if pool.kept else GenerationError(POOL, _why_none(record)))
    if failure is not None:
        failure.attempts, failure.pool = pool.calls, record
        return failure
    items = [candidate_of(generator, pool.event, d, pool, first=i == 0)
             for i, d in enumerate(pool.kept)]
    return Made(items, record)


async def screen(generator: Generator, pools: list[EventPool]) -> None:
    """The checks of every screened question of `pools`: their guesses (the masked
    questions to the checker, the whole ones to the model of the cutoff), then the open
    book for those no guess answered, each check's questions dealt across requests. Each
    pool gets its verdicts, its share of the calls, its survivors (best first) and each
    question's outcome."""
    assert generator.checker is not None
    checks = PooledChecker(generator.checker.client, generator.cutoff, generator.checker.counted,
                           generator.checker.guesser, seed=generator.seed)
    owner = {d.id: pool for pool in pools for d in pool.screened}
    questions = [_pooled(d, pool.event) for pool in pools for d in pool.screened]
    try:
        found = await checks.guesses(questions)
        left = [q for q in questions if _passed(found.verdicts[q.key])]
        found.add(await checks.open_book(left))
    except LLMError as exc:
        unasked(generator, pools, exc)
        return
    for key, verdicts in found.verdicts.items():
        owner[key].verdicts[key] = verdicts
    for key, calls in found.calls.items():
        owner[key].calls += calls
    for pool in pools:
        pool.outcome = {d.id: _outcome(pool.verdicts[d.id]) for d in pool.screened}
        pool.kept = [d for d in pool.screened if pool.outcome[d.id] == SURVIVED]


def unasked(generator: Generator, pools: list[EventPool], exc: LLMError) -> None:
    """Every pool fails when a checking model could not be asked (its checks measured
    nothing); a re-run asks again what the cache does not hold."""
    assert generator.checker is not None
    guesser = generator.checker.guesser
    model = exc.model or generator.checker.client.model
    who = (f"the probe model {model} (a model of the cutoff)"
           if guesser is not None and model == guesser.model else f"the checker {model}")
    for pool in pools:
        if not pool.screened:
            continue
        failure = GenerationError("Check", f"{who} could not be asked while composing: {exc}")
        failure.unasked = who
        failure.__cause__ = exc
        pool.failure = failure


def candidate_of(generator: Generator, event: Event, draft: Draft, pool: EventPool, first: bool
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
        known_source=generator.known_source,
        known_article=article.evidence if article and generator.known_source == "wiki" else None,
        bridge_description=draft.description, category=hop.category,
        masked_question=draft.masked, known_from=hop.known_from,
        rank=draft.rank, screening=pool.verdicts.get(draft.id, []),
    )
    used = {DESCRIBE_BRIDGES} if not generator.structure_first else set()
    if hop.known_from != "infobox":
        used.add(KNOWN_FACTS if generator.known_source == "wiki" else KNOWN_FACTS_MODEL)
    item = candidate_record(generator, event, draft.answer, draft.aliases, steps, used,
                            item_id=draft.id)
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
