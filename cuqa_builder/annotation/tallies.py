"""The review report's tallies: decisions, votes and agreement counted, per annotator too, and
the candidates whose judgements split the most."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from cuqa_builder.annotation.config import ACCEPT, REJECT, UNSURE
from cuqa_builder.annotation.decisions import JUDGEMENTS, Decision, rounded_mean
from cuqa_builder.annotation.export import UNDECIDED, ExportAnnotation, Vote
from cuqa_builder.records.items import CuqaItem
from cuqa_builder.review_report import (
    AnnotatorStats,
    Disagreement,
    DisputedEdit,
    Problem,
    ReviewReport,
    SentBack,
)

MOST_DISAGREED = 10  # items the report lists for the lead to re-check


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
            seconds_per_task=rounded_mean(v.lead_time for v in mine),
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


def review_report(
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
        mean_agreement=rounded_mean(multi),
        seconds_per_task=rounded_mean(v.lead_time for v in counted),
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
