"""A candidate's votes decided: each annotator's latest vote counted once, the majority of the
judgements, the edits most accepting annotators proposed (or a dispute), and the released item
with its review."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any

from cuqa_builder.annotation.config import ACCEPT, REJECT, UNSURE
from cuqa_builder.annotation.export import Vote
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.items import CuqaItem, Review
from cuqa_builder.review_report import (
    EditedField,
    Status,
)
from cuqa_builder.text import normalize_answer

JUDGEMENTS = (ACCEPT, REJECT)
# What the accepting annotators may edit: the field of the item, and the vote's attribute.
EDITS: tuple[tuple[EditedField, str], ...] = (("question", "rewrite"), ("answer", "correction"))



@dataclass(frozen=True)
class Decision:
    status: Status
    votes: tuple[Vote, ...]  # every counted annotation, unsure and undecided included
    agreement: float | None  # over the judgements
    short: bool = False  # fewer judgements than the task asks for
    disputes: tuple[tuple[EditedField, dict[str, str]], ...] = ()  # field, annotator -> text

    @property
    def judgements(self) -> tuple[Vote, ...]:
        return tuple(v for v in self.votes if v.verdict in JUDGEMENTS)



def latest_per_annotator(votes: Sequence[Vote]) -> list[Vote]:
    """An annotator who judged a candidate twice (two tasks, a redo) counts once: the latest."""
    latest: dict[str, Vote] = {}
    for vote in sorted(votes, key=lambda v: v.order):
        latest[vote.annotator] = vote
    return sorted(latest.values(), key=lambda v: v.order)


def decide(votes: Sequence[Vote], required: int = 1, allow_fewer: bool = False) -> Decision:
    """Majority of the judgements; fewer than `required` is "incomplete" unless allowed."""
    counts = Counter(v.verdict for v in votes)
    accepts, rejects = counts[ACCEPT], counts[REJECT]
    judged = accepts + rejects
    if not judged:
        return Decision(status="pending", votes=tuple(votes), agreement=None)
    accepting = [v for v in votes if v.verdict == ACCEPT]
    # An accept with another text than the leading edit does not agree with it.
    agreement = max(accepts - len(edit_dissenters(accepting)), rejects) / judged
    status: Status = "accepted" if accepts > rejects else "rejected" if rejects > accepts else "tie"
    disputes = edit_disputes(accepting)
    if status == "accepted" and disputes:
        status = "disputed"
    short = judged < required
    if short and not allow_fewer:
        status = "incomplete"
    return Decision(status=status, votes=tuple(votes), agreement=agreement, short=short,
                    disputes=disputes)


def _proposals(accepting: Sequence[Vote], attribute: str) -> dict[str, str]:
    """Annotator -> the edit they proposed for one box (an empty box proposes none)."""
    return {v.annotator: squash(getattr(v, attribute)) for v in accepting
            if getattr(v, attribute)}


def edit_dissenters(accepting: Sequence[Vote]) -> set[str]:
    """Accepting annotators who proposed a text other than the leading edit of a box."""
    dissenters = set()
    for _, attribute in EDITS:
        proposals = _proposals(accepting, attribute)
        leading = leading_edit(list(proposals.values()))
        dissenters |= {who for who, text in proposals.items() if text != leading}
    return dissenters


def edit_disputes(accepting: Sequence[Vote]) -> tuple[tuple[EditedField, dict[str, str]], ...]:
    """The boxes given different texts, none of them by more than half the accepting
    annotators."""
    disputes = []
    for name, attribute in EDITS:
        proposals = _proposals(accepting, attribute)
        counts = Counter(proposals.values())
        if len(counts) > 1 and max(counts.values()) * 2 <= len(accepting):
            disputes.append((name, proposals))
    return tuple(disputes)


def reviewed_item(candidate: Candidate, decision: Decision) -> CuqaItem:
    """The released item: accepted, with the accepting annotators' rewrite and correction."""
    item = candidate.to_item()
    judgements = decision.judgements
    accepting = [v for v in judgements if v.verdict == ACCEPT]
    question = chosen_edit(item.question, [v.rewrite for v in accepting])
    answer = chosen_edit(item.answer, [v.correction for v in accepting])
    extra: dict[str, Any] = {}
    updates: dict[str, Any] = {"question": question}
    if question != item.question:
        extra["original_question"] = item.question
    if answer != item.answer:
        extra["original_answer"] = item.answer
        updates |= _corrected_answer(item, answer)
    updates["review"] = Review(
        status="accepted",
        annotators=[v.annotator for v in judgements],
        agreement=decision.agreement,
        rewritten=question != item.question,
        answer_corrected=answer != item.answer,
        votes={ACCEPT: len(accepting), REJECT: len(judgements) - len(accepting)},
        unsure=sum(v.verdict == UNSURE for v in decision.votes),
        reasons=dict(Counter(r for v in judgements for r in v.reasons)),
        seconds=rounded_mean(v.lead_time for v in judgements),
        **extra,
    )
    return item.model_copy(update=updates)


def chosen_edit(original: str, proposals: Sequence[str]) -> str:
    """The edit most accepting annotators proposed (the latest on a tie), else the original.

    An empty text area, or one that repeats the original, proposes no edit.
    """
    edits = [p for p in proposals if p and squash(p) != squash(original)]
    return leading_edit(edits) or original


def leading_edit(edits: Sequence[str]) -> str | None:
    """The most proposed of some edits (the latest on a tie); None when there is none."""
    counts = Counter(squash(e) for e in edits)
    if not counts:
        return None
    best = max(counts.values())
    return next(squash(e) for e in reversed(edits) if counts[squash(e)] == best)


def _corrected_answer(item: CuqaItem, answer: str) -> dict[str, Any]:
    # The old aliases named the wrong answer; sub-questions that gave it now give the correction.
    old = normalize_answer(item.answer)
    sub_questions = [
        s.model_copy(update={"answer": answer}) if normalize_answer(s.answer) == old else s
        for s in item.sub_questions
    ]
    return {"answer": answer, "answer_aliases": [], "sub_questions": sub_questions}


def squash(text: str) -> str:
    return " ".join(text.split())


def rounded_mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(mean(present), 3) if present else None
