"""A Label Studio JSON export (the full one, not JSON_MIN) -> reviewed items and a review report.

Only what the labeling config allows is trusted: every result item is checked, and whatever does
not fit is reported and left out. Cancelled (skipped) annotations do not vote. Several annotators
of one candidate are resolved by majority; a tie is not an accept. Rewrites and answer
corrections come from the annotators who accepted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuqa_builder.annotation.config import (
    ACCEPT,
    CORRECTION,
    REASONS,
    REJECT,
    REWRITE,
    VERDICT,
    LabelingConfig,
    ResultError,
)
from cuqa_builder.annotation.tasks import candidate_id_of
from cuqa_builder.errors import CuqaError
from cuqa_builder.records import Candidate, CheckFailure, CuqaItem, Review
from cuqa_builder.text import normalize_answer
from cuqa_builder.validation.checks import Limits, answer_in_question, bridge_in_question

Status = Literal["accepted", "rejected", "tie", "pending"]


class ExportError(CuqaError, ValueError):
    pass


class _Lenient(BaseModel):
    # Label Studio exports carry many more keys than these; they are not ours to check.
    model_config = ConfigDict(extra="ignore")


class ExportAnnotation(_Lenient):
    id: int | None = None
    completed_by: int | dict[str, Any] | None = None
    result: list[Any] = Field(default_factory=list)
    was_cancelled: bool = False
    lead_time: float | None = None
    updated_at: str | None = None


class ExportTask(_Lenient):
    id: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    meta: dict[str, Any] | None = None
    annotations: list[ExportAnnotation] = Field(default_factory=list)


class Problem(BaseModel):
    """Something in the export that was not trusted, and what was done about it."""

    task: int | None = None
    annotation: int | None = None
    candidate: str | None = None
    message: str


class ReviewReport(BaseModel):
    tasks: int = Field(description="candidates found in the export")
    reviewed: int = Field(description="candidates with at least one counted vote")
    pending: int = Field(description="candidates nobody has judged yet")
    accepted: int
    rejected: int
    ties: int = Field(description="as many accepts as rejects: not accepted")
    accept_rate: float | None = Field(description="accepted / reviewed")
    rewritten: int
    answers_corrected: int
    reject_reasons: dict[str, int] = Field(description="reasons given by reject votes")
    annotations: int = Field(description="annotations in the export, cancelled included")
    cancelled: int
    votes: int = Field(description="annotations counted (one per annotator and candidate)")
    annotators: int
    multi_annotated: int = Field(description="candidates with two or more votes")
    mean_agreement: float | None = Field(
        description="over multi-annotated candidates: share of votes agreeing with the majority"
    )
    seconds_per_task: float | None = Field(description="mean lead time of the counted votes")
    rewrites_leaking_answer: list[str] = Field(
        default_factory=list,
        description="items the review edited whose question names the answer or the bridge",
    )
    unknown_candidates: list[str] = Field(
        default_factory=list, description="tasks whose candidate is not in candidates.jsonl"
    )
    problems: list[Problem] = Field(default_factory=list)

    def summary(self) -> str:
        rate = f"{self.accept_rate:.0%}" if self.accept_rate is not None else "n/a"
        lines = [
            f"review: {self.accepted} accepted, {self.rejected} rejected, {self.ties} tied, "
            f"{self.pending} pending of {self.tasks} tasks (accept rate {rate})",
            f"  {self.votes} votes by {self.annotators} annotators, {self.cancelled} cancelled; "
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
        if self.rewrites_leaking_answer:
            lines.append(f"  check these edited items, the question names the answer or "
                         f"the bridge: "
                         f"{', '.join(self.rewrites_leaking_answer)}")
        lines += [f"  not trusted: {p.message} (task {p.task})" for p in self.problems]
        if self.unknown_candidates:
            lines.append(f"  {len(self.unknown_candidates)} tasks match no candidate")
        return "\n".join(lines)


@dataclass(frozen=True)
class Vote:
    """One annotator's counted judgement of one candidate."""

    annotator: str
    verdict: str
    reasons: tuple[str, ...]
    rewrite: str
    correction: str
    lead_time: float | None
    order: tuple[str, int]  # (updated_at, annotation id): later wins


@dataclass(frozen=True)
class Decision:
    status: Status
    votes: tuple[Vote, ...]
    agreement: float | None


@dataclass
class ReviewOutcome:
    items: list[CuqaItem]
    report: ReviewReport


def parse_export(export: Any) -> tuple[list[ExportTask], list[Problem]]:
    """Typed tasks from an export; a task that is not even task-shaped is reported, not fatal."""
    if not isinstance(export, list):
        raise ExportError("a Label Studio JSON export is a list of tasks")
    if export and not any(isinstance(t, dict) and "data" in t for t in export):
        raise ExportError("no task in this file has `data`: export as JSON, not JSON_MIN or CSV")
    tasks, problems = [], []
    for number, raw in enumerate(export, start=1):
        try:
            tasks.append(ExportTask.model_validate(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"]))
            message = f"export entry {number} skipped: {where}: {first['msg']}"
            problems.append(Problem(message=message))
    return tasks, problems


def review_export(
    export: Any, candidates: Iterable[Candidate], config: LabelingConfig
) -> ReviewOutcome:
    tasks, problems = parse_export(export)
    known = {c.id: c for c in candidates}
    annotations = [a for t in tasks for a in t.annotations]
    votes_by_candidate: dict[str, list[Vote]] = {}
    unknown: list[str] = []
    for task in tasks:
        candidate_id = candidate_id_of(task.model_dump())
        if candidate_id not in known:
            unknown.append(candidate_id or f"task {task.id} (no candidate id)")
            continue
        votes = votes_by_candidate.setdefault(candidate_id, [])
        votes += _task_votes(task, candidate_id, config, problems)
    decisions = {cid: decide(latest_per_annotator(v)) for cid, v in votes_by_candidate.items()}
    items = [
        reviewed_item(known[cid], decisions[cid])
        for cid in known if cid in decisions and decisions[cid].status == "accepted"
    ]
    leaks = [item.id for item in items if _edited(item) and leaks_in_review(known[item.id], item)]
    report = _report(decisions, items, annotations, unknown, problems, leaks)
    return ReviewOutcome(items=items, report=report)


def _edited(item: CuqaItem) -> bool:
    return item.review.rewritten or bool(getattr(item.review, "answer_corrected", False))


def leaks_in_review(candidate: Candidate, item: CuqaItem) -> list[CheckFailure]:
    """The validators' leak checks on an item the review edited: a rewritten question, or a
    corrected answer, must not let the question name the answer (or an alias) nor, in ABC,
    the hidden bridge."""
    reviewed = candidate.model_copy(update={
        "question": item.question, "answer": item.answer, "answer_aliases": item.answer_aliases,
    })
    found = (answer_in_question(reviewed, Limits()), bridge_in_question(reviewed, Limits()))
    return [failure for failure in found if failure is not None]


def _task_votes(
    task: ExportTask, candidate_id: str, config: LabelingConfig, problems: list[Problem]
) -> list[Vote]:
    votes = []
    for annotation in task.annotations:
        if annotation.was_cancelled:
            continue
        vote, found = read_vote(annotation, config)
        problems += [
            Problem(task=task.id, annotation=annotation.id, candidate=candidate_id, message=m)
            for m in found
        ]
        if vote is not None:
            votes.append(vote)
    return votes


def read_vote(
    annotation: ExportAnnotation, config: LabelingConfig
) -> tuple[Vote | None, list[str]]:
    """The trusted parts of one annotation, and a message for each part that was not trusted."""
    values: dict[str, Any] = {}
    repeated: set[str] = set()
    problems = []
    for item in annotation.result:
        try:
            name, value = config.read_result(item)
        except ResultError as exc:
            problems.append(f"{exc}; ignored")
            continue
        if name in values:
            repeated.add(name)
        values[name] = value
    for name in sorted(repeated):  # two answers for one control: trust neither
        problems.append(f"{name}: given more than once; ignored")
        del values[name]
    verdict = values.get(VERDICT, ())
    if len(verdict) != 1:
        problems.append("no valid verdict; the annotation does not count")
        return None, problems
    vote = Vote(
        annotator=annotator_name(annotation.completed_by),
        verdict=verdict[0],
        reasons=values.get(REASONS, ()) if verdict[0] == REJECT else (),
        rewrite=values.get(REWRITE, ""),
        correction=values.get(CORRECTION, ""),
        lead_time=annotation.lead_time,
        order=(annotation.updated_at or "", annotation.id or 0),
    )
    return vote, problems


def annotator_name(completed_by: int | dict[str, Any] | None) -> str:
    """A pseudonymous id: released data names no annotator's e-mail."""
    user = completed_by.get("id") if isinstance(completed_by, dict) else completed_by
    return f"annotator-{user}" if user is not None else "annotator-unknown"


def latest_per_annotator(votes: Sequence[Vote]) -> list[Vote]:
    """An annotator who judged a candidate twice (two tasks, a redo) counts once: the latest."""
    latest: dict[str, Vote] = {}
    for vote in sorted(votes, key=lambda v: v.order):
        latest[vote.annotator] = vote
    return sorted(latest.values(), key=lambda v: v.order)


def decide(votes: Sequence[Vote]) -> Decision:
    if not votes:
        return Decision(status="pending", votes=(), agreement=None)
    counts = Counter(v.verdict for v in votes)
    accepts, rejects = counts[ACCEPT], counts[REJECT]
    status: Status = "accepted" if accepts > rejects else "rejected" if rejects > accepts else "tie"
    return Decision(status=status, votes=tuple(votes), agreement=max(accepts, rejects) / len(votes))


def reviewed_item(candidate: Candidate, decision: Decision) -> CuqaItem:
    """The released item: accepted, with the accepting annotators' rewrite and correction."""
    item = candidate.to_item()
    accepting = [v for v in decision.votes if v.verdict == ACCEPT]
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
        annotators=[v.annotator for v in decision.votes],
        agreement=decision.agreement,
        rewritten=question != item.question,
        answer_corrected=answer != item.answer,
        votes={ACCEPT: len(accepting), REJECT: len(decision.votes) - len(accepting)},
        reasons=dict(Counter(r for v in decision.votes for r in v.reasons)),
        seconds=_mean(v.lead_time for v in decision.votes),
        **extra,
    )
    return item.model_copy(update=updates)


def chosen_edit(original: str, proposals: Sequence[str]) -> str:
    """The edit most accepting annotators proposed (the latest on a tie), else the original.

    A text area left as pre-filled, or emptied, proposes no edit.
    """
    edits = [p for p in proposals if p and _squash(p) != _squash(original)]
    if not edits:
        return original
    counts = Counter(_squash(e) for e in edits)
    best = max(counts.values())
    return next(_squash(e) for e in reversed(edits) if counts[_squash(e)] == best)


def _corrected_answer(item: CuqaItem, answer: str) -> dict[str, Any]:
    # The old aliases named the wrong answer; sub-questions that gave it now give the correction.
    old = normalize_answer(item.answer)
    sub_questions = [
        s.model_copy(update={"answer": answer}) if normalize_answer(s.answer) == old else s
        for s in item.sub_questions
    ]
    return {"answer": answer, "answer_aliases": [], "sub_questions": sub_questions}


def _squash(text: str) -> str:
    return " ".join(text.split())


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(mean(present), 3) if present else None


def _report(
    decisions: dict[str, Decision],
    items: list[CuqaItem],
    annotations: list[ExportAnnotation],
    unknown: list[str],
    problems: list[Problem],
    leaks: list[str],
) -> ReviewReport:
    statuses = Counter(d.status for d in decisions.values())
    votes = [v for d in decisions.values() for v in d.votes]
    reviewed = len(decisions) - statuses["pending"]
    multi = [d.agreement for d in decisions.values() if len(d.votes) >= 2]
    return ReviewReport(
        tasks=len(decisions),
        reviewed=reviewed,
        pending=statuses["pending"],
        accepted=statuses["accepted"],
        rejected=statuses["rejected"],
        ties=statuses["tie"],
        accept_rate=round(statuses["accepted"] / reviewed, 4) if reviewed else None,
        rewritten=sum(i.review.rewritten for i in items),
        answers_corrected=sum(bool(getattr(i.review, "answer_corrected", False)) for i in items),
        reject_reasons=dict(Counter(r for v in votes for r in v.reasons).most_common()),
        annotations=len(annotations),
        cancelled=sum(a.was_cancelled for a in annotations),
        votes=len(votes),
        annotators=len({v.annotator for v in votes}),
        multi_annotated=len(multi),
        mean_agreement=_mean(multi),
        seconds_per_task=_mean(v.lead_time for v in votes),
        rewrites_leaking_answer=leaks,
        unknown_candidates=unknown,
        problems=problems,
    )
