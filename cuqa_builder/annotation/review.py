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
from typing import Any

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
    required_annotators,
    shown_hash_of,
)
from cuqa_builder.errors import CuqaError
from cuqa_builder.records import Candidate, CheckFailure, CuqaItem, Review
from cuqa_builder.review_report import (
    AnnotatorStats,
    Disagreement,
    DisputedEdit,
    EditedField,
    Problem,
    ReviewReport,
    SentBack,
    Status,
)
from cuqa_builder.text import normalize_answer
from cuqa_builder.validation.checks import check_edit
from cuqa_builder.validation.limits import Limits

UNDECIDED = "undecided"  # a submitted annotation without a verdict
JUDGEMENTS = (ACCEPT, REJECT)
MOST_DISAGREED = 10  # items the report lists for the lead to re-check
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
    # Their candidates were found in the export too: the summary counts them among its tasks.
    unshown_only = {c for ids in sent_back_unshown.values() for c in ids}
    return ReviewOutcome(items=items, report=report.model_copy(
        update={**sent_back_unshown, "tasks": report.tasks + len(unshown_only)}))


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
