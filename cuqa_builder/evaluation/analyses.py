"""The paper's analyses over finished runs: Self-DC's routes and confidences (section 6.4) and
FreshQA's groups (Table 11, Figure 7). Pure functions of the typed outputs; the report lays
them out and plots them."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from statistics import fmean

from pydantic import BaseModel

from cuqa_builder.evaluation.outputs import Prediction, Scores

SELF_DC = "self-dc"
SELF_DC_BRANCHES = ("decompose", "generate", "retrieve")
# Verbal confidences are whole percents; 0 ("I do not know") is a bin of its own.
CONFIDENCE_BINS = ("0", *(f"{lo + 1}-{lo + 10}" for lo in range(0, 100, 10)))
FRESHQA_YEARS = ("before-2022", "2022", "2023", "2024")
FRESHQA_HOPS = ("multi-hop", "one-hop")


def confidence_bin(confidence: float) -> str:
    percent = round(100 * confidence)
    if percent <= 0:
        return CONFIDENCE_BINS[0]
    return CONFIDENCE_BINS[min(10, math.ceil(percent / 10))]


def confidence_histogram(predictions: Sequence[Prediction]) -> dict[str, int]:
    """How many questions got each confidence (the question's own, not its sub-questions')."""
    counts = Counter(confidence_bin(p.confidence) for p in predictions
                     if p.confidence is not None)
    return {label: counts.get(label, 0) for label in CONFIDENCE_BINS}


class RouteShare(BaseModel):
    """The questions Self-DC first sent down one branch, and how they fared."""

    questions: int
    share: float  # of all routed questions
    cover_em: float
    acc: float | None  # over the judged ones; None without a judge
    decisions: int  # every decision for this branch, sub-questions included


def route_shares(predictions: Sequence[Prediction]) -> dict[str, RouteShare]:
    """Per Self-DC branch: how often it is the question's first decision, the accuracy of those
    questions, and how often it was taken at any depth. Empty for other methods."""
    routed = [p for p in predictions if p.route and p.route.startswith(f"{SELF_DC}:")]
    if not routed:
        return {}
    shares = {}
    for branch in SELF_DC_BRANCHES:
        key = f"{SELF_DC}:{branch}"
        first = [p for p in routed if p.route == key]
        judged = [p.acc for p in first if p.acc is not None]
        shares[branch] = RouteShare(
            questions=len(first), share=len(first) / len(routed),
            cover_em=fmean(p.cover_em for p in first) if first else 0.0,
            acc=fmean(judged) if judged else None,
            decisions=sum(p.routes.get(key, 0) for p in routed),
        )
    return shares


def headline(scores: Scores) -> tuple[float, str]:
    """The accuracy a figure shows: the judge's Acc when there is one, else Cover-EM."""
    if scores.acc is not None:
        return scores.acc, "Acc"
    return scores.cover_em, "Cover-EM"


def ordered_groups(groups: dict[str, Scores], known: Sequence[str]) -> list[str]:
    """The groups present, the paper's order first, then any others (sorted)."""
    return [g for g in known if g in groups] + sorted(set(groups) - set(known))
