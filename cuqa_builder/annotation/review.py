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

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from cuqa_builder.annotation.config import LabelingConfig
from cuqa_builder.annotation.decisions import (
    Decision,
    decide,
    latest_per_annotator,
    reviewed_item,
    squash,
)
from cuqa_builder.annotation.export import ExportTask, Vote, parse_export, read_vote
from cuqa_builder.annotation.tallies import review_report
from cuqa_builder.annotation.tasks import (
    DEFAULT_ANNOTATORS,
    candidate_id_of,
    changed_since_shown,
    required_annotators,
    shown_hash_of,
)
from cuqa_builder.records.candidates import Candidate, CheckFailure
from cuqa_builder.records.items import CuqaItem
from cuqa_builder.review_report import Problem, ReviewReport, SentBack
from cuqa_builder.validation.checks import check_edit
from cuqa_builder.validation.limits import Limits


@dataclass(frozen=True)
class ReviewRules:
    """How an export is turned into decisions."""

    default_annotators: int = DEFAULT_ANNOTATORS  # for tasks whose meta does not say
    allow_under_annotated: bool = False
    limits: Limits = field(default_factory=Limits)  # of the checks an edit must pass


@dataclass
class ReviewOutcome:
    items: list[CuqaItem]
    report: ReviewReport


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
    report = review_report(decisions, items, annotations, unknown, problems, sent_back)
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
        if squash(getattr(vote, attribute)) == squash(original)
    })

