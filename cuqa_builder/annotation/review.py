"""A Label Studio JSON export (the full one, not JSON_MIN) -> reviewed items and a review report.

Only what the labeling config allows is trusted: every result item is checked, and whatever does
not fit is reported and left out. Each annotator's latest annotation of a candidate counts once.
A *judgement* is accept or reject; "unsure", an annotation submitted without a verdict
(*undecided*: untouched, say) and a skipped (cancelled) one are counted apart and never vote.

A candidate is accepted when it has at least the judgements its task asks for (push writes the
number into the task's meta) and most of them accept; a tie is not an accept. Its rewrite and
answer correction come from the accepting annotators: an empty box proposes no edit, and when
they propose different texts for one box, the text that more than half of the accepting
annotators proposed is applied; without such a majority the item is *disputed* (every proposal
reported, nothing released until they settle), and a proposal other than the leading one counts
against the candidate's agreement. An edited item must pass every check of the question and
answer text again, or it is sent back (reported, never released).

A task carries a hash of the question and answer it showed (`tasks.SHOWN`): the annotations of a
task whose candidate has changed since (a refresh remade it under the same id) are sent back,
never applied to a text nobody judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from statistics import mean
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuqa_builder.annotation.config import (
    ACCEPT,
    CORRECTION,
    REASONS,
    REJECT,
    REWRITE,
    UNSURE,
    VERDICT,
    LabelingConfig,
    ResultError,
)
from cuqa_builder.annotation.tasks import (
    DEFAULT_ANNOTATORS,
    candidate_id_of,
    changed_since_shown,
    quoted,
    required_annotators,
    shown_hash_of,
)
from cuqa_builder.errors import CuqaError
from cuqa_builder.records import Candidate, CheckFailure, CuqaItem, Review
from cuqa_builder.text import normalize_answer
from cuqa_builder.validation.checks import check_edit
from cuqa_builder.validation.limits import Limits

Status = Literal["accepted", "rejected", "tie", "pending", "incomplete", "sent_back",
                 "disputed"]
UNDECIDED = "undecided"  # a submitted annotation without a verdict
JUDGEMENTS = (ACCEPT, REJECT)
MOST_DISAGREED = 10  # items the report lists for the lead to re-check
_SHOWN_IDS = 8  # ids a summary line names before "and N more"
EditedField = Literal["question", "answer"]
# What the accepting annotators may edit: the field of the item, and the vote's attribute.
EDITS: tuple[tuple[EditedField, str], ...] = (("question", "rewrite"), ("answer", "correction"))


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
    tasks: int = Field(description="candidates found in the export")
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

    def summary(self) -> str:
        rate = f"{self.accept_rate:.0%}" if self.accept_rate is not None else "n/a"
        lines = [
            f"review: {self.accepted} accepted, {self.rejected} rejected, {self.ties} tied, "
            f"{self.incomplete} need more reviews, {len(self.sent_back)} sent back, "
            f"{self.pending} pending of {self.tasks} tasks (accept rate {rate})",
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


@dataclass(frozen=True)
class ReviewRules:
    """How an export is turned into decisions."""

    default_annotators: int = DEFAULT_ANNOTATORS  # for tasks whose meta does not say
    allow_under_annotated: bool = False
    limits: Limits = field(default_factory=Limits)  # of the checks an edit must pass


@dataclass(frozen=True)
class Vote:
    """One annotator's counted annotation of one candidate."""

    annotator: str
    verdict: str  # accept, reject, unsure or undecided
    reasons: tuple[str, ...]
    rewrite: str
    correction: str
    lead_time: float | None
    order: tuple[str, int]  # (updated_at, annotation id): later wins


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
    export: Any, candidates: Iterable[Candidate], config: LabelingConfig,
    rules: ReviewRules | None = None,
) -> ReviewOutcome:
    rules = rules or ReviewRules()
    tasks, problems = parse_export(export)
    known = {c.id: c for c in candidates}
    annotations = [a for t in tasks for a in t.annotations]
    votes_by_candidate: dict[str, list[Vote]] = {}
    required: dict[str, int] = {}
    unknown: list[str] = []
    unshown: dict[str, list[str]] = {"changed_since_shown": [], "shown_unknown": []}
    for task in tasks:
        dumped = task.model_dump()
        candidate_id = candidate_id_of(dumped)
        if candidate_id not in known:
            unknown.append(candidate_id or f"task {task.id} (no candidate id)")
            continue
        if (kind := _not_proven_shown(dumped, known[candidate_id])) is not None:
            if candidate_id not in unshown[kind]:
                unshown[kind].append(candidate_id)
            continue
        wanted = required_annotators(dumped, rules.default_annotators)
        required[candidate_id] = max(required.get(candidate_id, 0), wanted)
        votes = votes_by_candidate.setdefault(candidate_id, [])
        votes += _task_votes(task, known[candidate_id], config, problems)
    decisions = {
        cid: decide(latest_per_annotator(votes), required[cid], rules.allow_under_annotated)
        for cid, votes in votes_by_candidate.items()
    }
    items, sent_back = _release(known, decisions, rules.limits)
    report = _report(decisions, items, annotations, unknown, problems, sent_back)
    # A task that shows the text (pushed again) decides the candidate: the others are moot.
    sent_back_unshown = {kind: [c for c in ids if c not in votes_by_candidate]
                         for kind, ids in unshown.items()}
    return ReviewOutcome(items=items, report=report.model_copy(update=sent_back_unshown))


def _not_proven_shown(task: dict[str, Any], candidate: Candidate) -> str | None:
    """Why nothing proves that the task's annotators saw the candidate's text as it is now (the
    report field that lists such candidates), or None: they did."""
    if shown_hash_of(task) is None:
        return "shown_unknown"
    return "changed_since_shown" if changed_since_shown(task, candidate) else None


def _release(
    known: dict[str, Candidate], decisions: dict[str, Decision], limits: Limits
) -> tuple[list[CuqaItem], list[SentBack]]:
    """The accepted items whose edits pass the checks; the others are sent back (the decision
    is updated to say so)."""
    items, sent_back = [], []
    for cid, candidate in known.items():
        decision = decisions.get(cid)
        if decision is None or decision.status != "accepted":
            continue
        item = reviewed_item(candidate, decision)
        failures = edit_failures(candidate, item, limits)
        if failures:
            decisions[cid] = replace(decision, status="sent_back")
            sent_back.append(SentBack(candidate=cid, question=item.question, answer=item.answer,
                                      failures=failures))
        else:
            items.append(item)
    return items, sent_back


def edit_failures(candidate: Candidate, item: CuqaItem, limits: Limits) -> list[CheckFailure]:
    """The checks of the question and answer text, run again on an item the review edited: a
    rewrite like "x", pasted markup, two questions in one box or a leaked answer fails here."""
    if item.question == candidate.question and item.answer == candidate.answer:
        return []
    edited = candidate.model_copy(update={
        "question": item.question, "answer": item.answer,
        "answer_aliases": item.answer_aliases, "sub_questions": item.sub_questions,
    })
    return check_edit(edited, limits)


def _task_votes(
    task: ExportTask, candidate: Candidate, config: LabelingConfig, problems: list[Problem]
) -> list[Vote]:
    votes = []
    for annotation in task.annotations:
        if annotation.was_cancelled:
            continue
        vote, found = read_vote(annotation, config)
        problems += [
            Problem(task=task.id, annotation=annotation.id, candidate=candidate.id, message=m)
            for m in found
        ]
        if vote is not None:
            votes.append(_own_edits(vote, candidate))
    return votes


def _own_edits(vote: Vote, candidate: Candidate) -> Vote:
    """The vote with an edit that only repeats the candidate's text dropped: it proposes none."""
    unchanged = {"rewrite": candidate.question, "correction": candidate.answer}
    return replace(vote, **{
        attribute: "" for attribute, original in unchanged.items()
        if _squash(getattr(vote, attribute)) == _squash(original)
    })


def read_vote(
    annotation: ExportAnnotation, config: LabelingConfig
) -> tuple[Vote | None, list[str]]:
    """The trusted parts of one annotation, and a message for each part that was not trusted.

    No verdict at all is an undecided vote; a verdict that cannot be trusted is no vote.
    """
    values, problems = _trusted_values(annotation.result, config)
    verdict = values.get(VERDICT)
    if verdict is None:
        if any(isinstance(i, dict) and i.get("from_name") == VERDICT for i in annotation.result):
            problems.append("no valid verdict; the annotation does not count")
            return None, problems
        verdict = (UNDECIDED,)
    judged = verdict[0]
    vote = Vote(
        annotator=annotator_name(annotation.completed_by),
        verdict=judged,
        reasons=values.get(REASONS, ()) if judged == REJECT else (),
        rewrite=values.get(REWRITE, "") if judged == ACCEPT else "",
        correction=values.get(CORRECTION, "") if judged == ACCEPT else "",
        lead_time=annotation.lead_time,
        order=(annotation.updated_at or "", annotation.id or 0),
    )
    return vote, problems


def _trusted_values(result: list[Any], config: LabelingConfig) -> tuple[dict[str, Any], list[str]]:
    values: dict[str, Any] = {}
    repeated: set[str] = set()
    problems = []
    for item in result:
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
    return values, problems


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
    return {v.annotator: _squash(getattr(v, attribute)) for v in accepting
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
        seconds=_mean(v.lead_time for v in judgements),
        **extra,
    )
    return item.model_copy(update=updates)


def chosen_edit(original: str, proposals: Sequence[str]) -> str:
    """The edit most accepting annotators proposed (the latest on a tie), else the original.

    An empty text area, or one that repeats the original, proposes no edit.
    """
    edits = [p for p in proposals if p and _squash(p) != _squash(original)]
    return leading_edit(edits) or original


def leading_edit(edits: Sequence[str]) -> str | None:
    """The most proposed of some edits (the latest on a tie); None when there is none."""
    counts = Counter(_squash(e) for e in edits)
    if not counts:
        return None
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


def _rate(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "n/a"


def _ids(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_SHOWN_IDS])
    return shown + (f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else "")


def per_annotator(votes: Iterable[Vote]) -> dict[str, AnnotatorStats]:
    by_annotator: dict[str, list[Vote]] = {}
    for vote in votes:
        by_annotator.setdefault(vote.annotator, []).append(vote)
    stats = {}
    for name in sorted(by_annotator):
        mine = by_annotator[name]
        counts = Counter(v.verdict for v in mine)
        judged = counts[ACCEPT] + counts[REJECT]
        stats[name] = AnnotatorStats(
            judgements=judged, accepted=counts[ACCEPT], rejected=counts[REJECT],
            unsure=counts[UNSURE], undecided=counts[UNDECIDED],
            accept_rate=round(counts[ACCEPT] / judged, 4) if judged else None,
            seconds_per_task=_mean(v.lead_time for v in mine),
        )
    return stats


def most_disagreed(
    decisions: dict[str, Decision], limit: int = MOST_DISAGREED
) -> list[Disagreement]:
    """Candidates whose judgements split, the least agreed (then the most judged) first."""
    split = [(cid, d) for cid, d in decisions.items()
             if d.agreement is not None and d.agreement < 1]
    split.sort(key=lambda pair: (pair[1].agreement, -len(pair[1].judgements), pair[0]))
    return [
        Disagreement(
            candidate=cid, status=d.status, agreement=round(d.agreement or 0.0, 4),
            accept=sum(v.verdict == ACCEPT for v in d.votes),
            reject=sum(v.verdict == REJECT for v in d.votes),
            unsure=sum(v.verdict == UNSURE for v in d.votes),
        )
        for cid, d in split[:limit]
    ]


def _report(
    decisions: dict[str, Decision],
    items: list[CuqaItem],
    annotations: list[ExportAnnotation],
    unknown: list[str],
    problems: list[Problem],
    sent_back: list[SentBack],
) -> ReviewReport:
    statuses = Counter(d.status for d in decisions.values())
    counted = [v for d in decisions.values() for v in d.votes]
    judgements = [v for v in counted if v.verdict in JUDGEMENTS]
    verdicts = Counter(v.verdict for v in counted)
    decided = statuses["accepted"] + statuses["rejected"] + statuses["tie"] + len(sent_back)
    multi = [d.agreement for d in decisions.values() if len(d.judgements) >= 2]
    return ReviewReport(
        tasks=len(decisions),
        reviewed=len(decisions) - statuses["pending"],
        pending=statuses["pending"],
        accepted=statuses["accepted"],
        rejected=statuses["rejected"],
        ties=statuses["tie"],
        incomplete=statuses["incomplete"],
        accept_rate=round(statuses["accepted"] / decided, 4) if decided else None,
        rewritten=sum(i.review.rewritten for i in items),
        answers_corrected=sum(bool(getattr(i.review, "answer_corrected", False)) for i in items),
        reject_reasons=dict(Counter(r for v in judgements for r in v.reasons).most_common()),
        annotations=len(annotations),
        cancelled=sum(a.was_cancelled for a in annotations),
        unsure=verdicts[UNSURE],
        undecided=verdicts[UNDECIDED],
        votes=len(judgements),
        annotators=len({v.annotator for v in counted}),
        multi_annotated=len(multi),
        mean_agreement=_mean(multi),
        seconds_per_task=_mean(v.lead_time for v in counted),
        per_annotator=per_annotator(counted),
        most_disagreed=most_disagreed(decisions),
        sent_back=sent_back,
        disputed=[DisputedEdit(candidate=cid, field=name, proposals=proposals)
                  for cid, d in decisions.items() for name, proposals in d.disputes],
        needs_more_reviews=[cid for cid, d in decisions.items() if d.status == "incomplete"],
        decided_with_fewer=[cid for cid, d in decisions.items()
                            if d.status != "incomplete" and d.short],
        unknown_candidates=unknown,
        problems=problems,
    )
