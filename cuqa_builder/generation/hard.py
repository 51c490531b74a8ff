"""Hard items (Algorithm 1, line 12 and section 3.2): two easy items merged into a 4-hop question.

Two easy items compose when one's answer is a bridge into the other: it occurs in the other's
question ("question") or names an entity of the other's event ("entities"); failing a bridge,
two items with the same answer compose AAB-style ("answer"). Pairs are ranked by that order, then
by a hash of the seed and both ids, and taken greedily so each easy item is used once: the same
easy items and seed always give the same pairs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cuqa_builder.generation.algorithm import Generator
from cuqa_builder.generation.steps import MERGE_QUESTIONS, merge_check
from cuqa_builder.records.candidates import Candidate, Pairing
from cuqa_builder.records.events import Entity, answer_aliases
from cuqa_builder.records.items import GeneratorInfo, QuestionType
from cuqa_builder.text import normalize_answer

LinkKind = Literal["question", "entities", "answer"]
_LINK_RANK: dict[LinkKind, int] = {"question": 0, "entities": 1, "answer": 2}


def hard_id(first_id: str, second_id: str) -> str:
    return f"cqh-{hashlib.sha256(f'{first_id}+{second_id}'.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class Pair:
    first: Candidate  # its answer is the bridge
    second: Candidate  # builds on the bridge; its answer is the hard item's answer
    link: LinkKind

    @property
    def id(self) -> str:
        return hard_id(self.first.id, self.second.id)


@dataclass(frozen=True)
class _Normalised:
    """An easy item's comparable forms, computed once (pairing looks at every ordered pair)."""

    item: Candidate
    answer: str
    question: str  # padded with spaces so a whole-word search is a substring test
    entities: frozenset[str]

    @classmethod
    def of(cls, item: Candidate, event_entities: list[Entity]) -> _Normalised:
        names = {n for e in event_entities for n in (e.text, e.wiki_title) if n}
        return cls(
            item=item,
            answer=normalize_answer(item.answer),
            question=f" {normalize_answer(item.question)} ",
            entities=frozenset(normalize_answer(n) for n in names),
        )


def _link(first: _Normalised, second: _Normalised) -> LinkKind | None:
    if not first.answer or first.item.event.id == second.item.event.id:
        return None
    if first.answer == second.answer:
        # A shared answer is symmetric: keep one direction of the pair.
        return "answer" if first.item.id < second.item.id else None
    if f" {first.answer} " in second.question:
        return "question"
    if first.answer in second.entities:
        return "entities"
    return None


def choose_pairs(
    easy: list[Candidate], event_entities: Mapping[str, list[Entity]], seed: int, count: int
) -> list[Pair]:
    """Up to `count` composable pairs, bridges first, each easy item in at most one pair."""
    forms = [_Normalised.of(item, event_entities.get(item.event.id, [])) for item in easy]
    ranked: list[tuple[int, str, Pair]] = []
    for first in forms:
        for second in forms:
            if first is not second and (link := _link(first, second)):
                pair = Pair(first.item, second.item, link)
                tiebreak = hashlib.sha256(f"{seed}:{pair.id}".encode()).hexdigest()
                ranked.append((_LINK_RANK[link], tiebreak, pair))
    ranked.sort(key=lambda entry: entry[:2])
    chosen: list[Pair] = []
    used: set[str] = set()
    for _, _, pair in ranked:
        if len(chosen) == count:
            break
        if pair.first.id in used or pair.second.id in used:
            continue
        chosen.append(pair)
        used.update((pair.first.id, pair.second.id))
    return chosen


def _easy_bridges(item: Candidate) -> list[str]:
    """The hidden bridge of an easy ABC item (its cur_ent), which the merge must not name."""
    steps = item.intermediates
    if steps is None or steps.k_ent is None:
        return []
    return [steps.cur_ent.text, *answer_aliases(steps.cur_ent)]


def _merge_seed(pair: Pair) -> int:
    return int(pair.id.removeprefix("cqh-"), 16) % 2**31


async def merge_pair(generator: Generator, pair: Pair) -> Candidate:
    """MergeQuestions over two easy questions: one four-hop question, all four sub-questions."""
    first, second = pair.first, pair.second
    shared = pair.link == "answer"
    aliases = [*second.answer_aliases, *(a for a in first.answer_aliases if shared)]
    bridges = [] if shared else [first.answer, *first.answer_aliases]
    bridges += [b for item in (first, second) for b in _easy_bridges(item)]
    result = await generator.call(
        MERGE_QUESTIONS,
        {"unknown_question": first.question, "known_question": second.question},
        _merge_seed(pair),
        merge_check([second.answer, *aliases], bridges, [first.question, second.question]),
    )
    item_type: QuestionType = "AAB" if shared else "ABC"
    merge = MERGE_QUESTIONS.template
    return Candidate(
        id=pair.id,
        question=result.parsed,
        answer=second.answer,
        answer_aliases=list(dict.fromkeys(aliases)),
        type=item_type,
        difficulty="hard",
        sub_questions=[*first.sub_questions, *second.sub_questions],
        event=second.event,
        cutoff=generator.cutoff,
        generator=GeneratorInfo(
            model=generator.gateway.model,
            prompts={**first.generator.prompts, **second.generator.prompts,
                     merge: generator.templates[merge].sha256},
        ),
        sub_items=[first, second],
        seed=generator.seed,
        pairing=Pairing(link=pair.link, bridge=first.answer, call=result.attempts[-1],
                        rejected=result.attempts[:-1]),
    )
