"""Near-duplicates: the same item reworded.

Two items are near-duplicates when they ask about the same event with the same answer (items of
the same difficulty: a hard item ends on an easy item's event and answer by design), go through
the same bridge to the same answer (one story told by two events: an earthquake, then its death
toll), or when their questions differ only in wording (token-set similarity at least `SIMILAR`;
two items of one event with other answers ask other things, however alike their words). Only items
that share the event or the answer are compared, so the pass stays fast on large runs and two
templated questions about different events are not confused. A hard item and the easy items it
was merged from are not duplicates of each other. Of each group the first item without other
failures is kept; the others are flagged `near_duplicate of <id>`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from cuqa_builder.records.candidates import Candidate, CheckFailure
from cuqa_builder.similarity import SIMILAR, overlap_similarity
from cuqa_builder.text import normalize_answer

NEAR_DUPLICATE = "near_duplicate"


def _related(a: Candidate, b: Candidate) -> bool:
    """One is merged from the other (a hard item and its easy items)."""
    return any(sub.id == b.id for sub in a.sub_items) or any(sub.id == a.id for sub in b.sub_items)


def _bridge(item: Candidate) -> str | None:
    steps = item.intermediates
    return (steps.cur_ent.wiki_title or steps.cur_ent.text) if steps is not None else None


def _why_alike(a: Candidate, b: Candidate) -> str | None:
    if _related(a, b):
        return None
    same_kind = a.difficulty == b.difficulty  # a hard item ends on an easy item's event/answer
    same_answer = normalize_answer(a.answer) == normalize_answer(b.answer)
    if same_kind and same_answer and a.event.id == b.event.id:
        return "same event and answer"
    if a.event.id == b.event.id and not same_answer:
        return None  # two hops of one event: other questions, however alike their words
    score = overlap_similarity(a.question, b.question)
    if score >= SIMILAR:
        return f"questions {score:.0f}% alike"
    if same_kind and same_answer and _bridge(a) is not None and _bridge(a) == _bridge(b):
        return "same bridge and answer: one story told by two events"
    return None


def find_near_duplicates(
    candidates: Sequence[Candidate], failures: Sequence[list[CheckFailure]]
) -> dict[int, CheckFailure]:
    """Index -> its near-duplicate failure, for every item that rewords a kept one."""
    order = sorted(range(len(candidates)), key=lambda i: bool(failures[i]))  # clean ones first
    kept_by_block: defaultdict[str, list[int]] = defaultdict(list)
    flagged: dict[int, CheckFailure] = {}
    for index in order:
        item = candidates[index]
        blocks = (f"event:{item.event.id}", f"answer:{normalize_answer(item.answer)}")
        match = next(
            ((kept, why) for block in blocks for kept in kept_by_block[block]
             if (why := _why_alike(candidates[kept], item))),
            None,
        )
        if match is not None:
            kept, why = match
            flagged[index] = CheckFailure(
                check=NEAR_DUPLICATE, reason=f"near_duplicate of {candidates[kept].id} ({why})"
            )
            continue
        for block in blocks:
            kept_by_block[block].append(index)
    return flagged
