"""The review report (`review.json`): what a Label Studio review decided, counted. A record on
disk that the annotate commands write and the validate and release stages read, so it lives
below all of them (`annotation/review.py` makes it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from cuqa_builder.records.candidates import CheckFailure

Status = Literal["accepted", "rejected", "tie", "pending", "incomplete", "sent_back",
                 "disputed"]
EditedField = Literal["question", "answer"]
_SHOWN_IDS = 8  # ids a summary line names before "and N more"


class Problem(BaseModel):
    """Something in the export that was not trusted, and what was done about it."""

    task: int | None = None
    annotation: int | None = None
    candidate: str | None = None
    message: str


class SentBack(BaseModel):
    """An accepted item whose edited question or answer fails a check: not released."""

    candidate: str
    question: str
    answer: str
    failures: list[CheckFailure]


class DisputedEdit(BaseModel):
    """Accepting annotators who proposed different texts for one box, none by a majority."""

    candidate: str
    field: EditedField
    proposals: dict[str, str] = Field(description="annotator -> the text they proposed")


class AnnotatorStats(BaseModel):
    judgements: int = Field(description="accepts and rejects counted")
    accepted: int
    rejected: int
    unsure: int
    undecided: int
    accept_rate: float | None = Field(description="accepted / judgements")
    seconds_per_task: float | None


class Disagreement(BaseModel):
    candidate: str
    status: Status
    accept: int
    reject: int
    unsure: int
    agreement: float


class ReviewReport(BaseModel):
    tasks: int = Field(description="candidates found in the export (those whose annotations "
                       "were sent back unapplied included)")
    reviewed: int = Field(description="candidates with at least one judgement")
    pending: int = Field(description="candidates nobody has judged yet")
    accepted: int
    rejected: int
    ties: int = Field(description="as many accepts as rejects: not accepted")
    incomplete: int = Field(
        default=0, description="candidates with fewer judgements than their task asks for"
    )
    accept_rate: float | None = Field(
        description="accepted / decided (accepted, rejected, tied or sent back)"
    )
    rewritten: int
    answers_corrected: int
    reject_reasons: dict[str, int] = Field(description="reasons given by reject votes")
    annotations: int = Field(description="annotations in the export, cancelled included")
    cancelled: int = Field(description="skipped annotations")
    unsure: int = Field(default=0, description="annotations that chose unsure")
    undecided: int = Field(default=0, description="annotations submitted without a verdict")
    votes: int = Field(description="judgements counted (one per annotator and candidate)")
    annotators: int
    multi_annotated: int = Field(description="candidates with two or more judgements")
    mean_agreement: float | None = Field(
        description="over multi-annotated candidates: share of judgements agreeing with the "
        "majority"
    )
    seconds_per_task: float | None = Field(description="mean lead time of the counted annotations")
    per_annotator: dict[str, AnnotatorStats] = Field(default_factory=dict)
    most_disagreed: list[Disagreement] = Field(
        default_factory=list, description="the least agreed candidates first, for a re-check"
    )
    sent_back: list[SentBack] = Field(
        default_factory=list, description="accepted, but the edit fails a check: not released"
    )
    disputed: list[DisputedEdit] = Field(
        default_factory=list, description="accepted with different rewrites or corrections and "
        "none by a majority of the accepting annotators: not released until they settle"
    )
    changed_since_shown: list[str] = Field(
        default_factory=list, description="candidates that changed since their task was made "
        "(a refresh): those annotations are sent back, not applied"
    )
    shown_unknown: list[str] = Field(
        default_factory=list, description="candidates whose task does not say which question "
        "and answer it showed (its meta.shown is missing or not a hash): those annotations are "
        "sent back, not applied"
    )
    needs_more_reviews: list[str] = Field(
        default_factory=list, description="candidates with fewer judgements than required"
    )
    decided_with_fewer: list[str] = Field(
        default_factory=list,
        description="decided with fewer judgements than required (--allow-under-annotated)",
    )
    unknown_candidates: list[str] = Field(
        default_factory=list, description="tasks whose candidate is not in candidates.jsonl"
    )
    problems: list[Problem] = Field(default_factory=list)

    @property
    def sent_back_count(self) -> int:
        """Candidates sent back: an edit that fails a check, or a text nobody is proven to have
        seen (each candidate once)."""
        return len({*(s.candidate for s in self.sent_back), *self.changed_since_shown,
                    *self.shown_unknown})

    def summary(self) -> str:
        """The counts first, which add up to the tasks, then what each count lists."""
        rate = f"{self.accept_rate:.0%}" if self.accept_rate is not None else "n/a"
        disputed = len({d.candidate for d in self.disputed})
        lines = [
            f"review: {self.accepted} accepted, {self.rejected} rejected, {self.ties} tied, "
            f"{disputed} disputed, {self.incomplete} need more reviews, {self.sent_back_count} "
            f"sent back, {self.pending} pending of {self.tasks} tasks (accept rate {rate})",
            f"  {self.votes} judgements by {self.annotators} annotators; {self.unsure} unsure, "
            f"{self.undecided} undecided (submitted without a verdict), {self.cancelled} skipped; "
            f"{self.rewritten} questions rewritten, {self.answers_corrected} answers corrected",
        ]
        if self.mean_agreement is not None:
            lines.append(f"  agreement {self.mean_agreement:.2f} over {self.multi_annotated} "
                         "multi-annotated tasks")
        if self.seconds_per_task is not None:
            lines.append(f"  {self.seconds_per_task:.1f} s per task")
        if self.reject_reasons:
            reasons = ", ".join(f"{r} {n}" for r, n in self.reject_reasons.items())
            lines.append(f"  reject reasons: {reasons}")
        if self.per_annotator:
            lines.append("  accept rate per annotator: " + ", ".join(
                f"{name} {_rate(s.accept_rate)} of {s.judgements}"
                for name, s in self.per_annotator.items()))
        if self.most_disagreed:
            lines.append("  most disagreed (re-check these): " + ", ".join(
                f"{d.candidate} ({d.accept} accept, {d.reject} reject)"
                for d in self.most_disagreed))
        lines += [f"  sent back, the edit fails a check: {s.candidate}: "
                  + "; ".join(f"{f.check}: {f.reason}" for f in s.failures)
                  for s in self.sent_back]
        lines += [f"  disputed, the accepting annotators proposed different {d.field}s (not "
                  f"released; settle it in Label Studio and pull again): {d.candidate}: "
                  + " / ".join(f"{who} {quoted(text)}" for who, text in d.proposals.items())
                  for d in self.disputed]
        if self.changed_since_shown:
            lines.append(f"  sent back, the question or answer changed since the task was made "
                         f"(a refresh?): {_ids(self.changed_since_shown)}; their annotations are "
                         "not applied: export or push the new text for review")
        if self.shown_unknown:
            lines.append(f"  sent back, the task does not say which question and answer it "
                         f"showed (its meta.shown is missing or not a hash): "
                         f"{_ids(self.shown_unknown)}; their annotations are not applied: push "
                         "or export again for a task that does")
        if self.needs_more_reviews:
            lines.append(f"  need more reviews (fewer judgements than required; "
                         f"--allow-under-annotated decides them anyway): "
                         f"{_ids(self.needs_more_reviews)}")
        if self.decided_with_fewer:
            lines.append(f"  decided with fewer judgements than required, as told: "
                         f"{_ids(self.decided_with_fewer)}")
        lines += [f"  not trusted: {p.message} (task {p.task})" for p in self.problems]
        if self.unknown_candidates:
            lines.append(f"  {len(self.unknown_candidates)} tasks match no candidate")
        return "\n".join(lines)


def _rate(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "n/a"


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_SHOWN_IDS])
    return shown + (f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else "")


def quoted(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return f"“{text if len(text) <= limit else text[:limit] + '…'}”"
