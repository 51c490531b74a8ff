"""The answer metrics, best over every gold answer (and alias), their aggregates, and the
compositionality gap of the Self-Ask paper (Press et al., 2023, section 2).

- `cover_em`: a gold answer, normalised, occurs in the normalised prediction as whole words. This
  is the Self-DC paper's EM: its Tables 1-4, 12 and 13 have EM above F1 in nearly every row, which
  exact string equality cannot give (EM = 1 implies F1 = 1).
- `em` and `f1`: SQuAD's exact match and token F1 after the same normalisation.

`yes_no_first_word` (ours, off by default): against a yes/no gold, a prediction opening with yes or
no ("Yes, it was held in ...") is read as that one word by `em` and `f1`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from statistics import fmean

from cuqa_builder.evaluation.outputs import (
    CountStats,
    EvalSettings,
    GapResult,
    MetricsFile,
    Prediction,
    Scores,
)
from cuqa_builder.text import contains_answer, normalize_answer

YES_NO = frozenset({"yes", "no"})
COUNTS = ("retrieval_calls", "llm_calls", "tokens", "cost")


def _tokens_against(
    prediction: str, gold: str, yes_no_first_word: bool
) -> tuple[list[str], list[str]]:
    pred = normalize_answer(prediction).split()
    want = normalize_answer(gold).split()
    if yes_no_first_word and want in (["yes"], ["no"]) and pred and pred[0] in YES_NO:
        pred = pred[:1]
    return pred, want


def _exact(prediction: str, gold: str, yes_no_first_word: bool) -> float:
    pred, want = _tokens_against(prediction, gold, yes_no_first_word)
    return float(bool(pred) and pred == want)


def _f1(prediction: str, gold: str, yes_no_first_word: bool) -> float:
    pred, want = _tokens_against(prediction, gold, yes_no_first_word)
    common = sum((Counter(pred) & Counter(want)).values())
    if not pred or not want or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(want)
    return 2 * precision * recall / (precision + recall)


def cover_match(prediction: str, golds: Sequence[str]) -> float:
    """The paper's EM: 1.0 when some gold answer is contained in the prediction."""
    return float(any(contains_answer(prediction, g) for g in golds))


def exact_match(
    prediction: str, golds: Sequence[str], *, yes_no_first_word: bool = False
) -> float:
    return max((_exact(prediction, g, yes_no_first_word) for g in golds), default=0.0)


def f1_score(prediction: str, golds: Sequence[str], *, yes_no_first_word: bool = False) -> float:
    return max((_f1(prediction, g, yes_no_first_word) for g in golds), default=0.0)


# --- aggregates --------------------------------------------------------------------------


def _count(prediction: Prediction, name: str) -> float:
    return float(getattr(prediction, name))


def summarize(predictions: Sequence[Prediction]) -> Scores:
    """Means of EM/F1 (and Acc over the judged items), mean and total of every count."""
    judged = [p.acc for p in predictions if p.acc is not None]
    counts: dict[str, CountStats] = {}
    for name in COUNTS:
        values = [_count(p, name) for p in predictions]
        counts[name] = CountStats(mean=fmean(values) if values else 0.0, total=sum(values))
    return Scores(
        n=len(predictions),
        cover_em=fmean(p.cover_em for p in predictions) if predictions else 0.0,
        em=fmean(p.em for p in predictions) if predictions else 0.0,
        f1=fmean(p.f1 for p in predictions) if predictions else 0.0,
        acc=fmean(judged) if judged else None,
        judged=len(judged),
        **counts,
    )


def _grouped(
    predictions: Iterable[Prediction], key: Callable[[Prediction], str | None]
) -> dict[str, Scores]:
    groups: dict[str, list[Prediction]] = defaultdict(list)
    for prediction in predictions:
        label = key(prediction)
        if label is not None:
            groups[label].append(prediction)
    return {label: summarize(group) for label, group in sorted(groups.items())}


def metrics(
    predictions: Sequence[Prediction], run: EvalSettings, *, complete: bool
) -> MetricsFile:
    """The whole of `metrics.json`."""
    return MetricsFile(
        **summarize(predictions).model_dump(),
        run=run,
        complete=complete,
        by_type=_grouped(predictions, lambda p: p.type),
        by_difficulty=_grouped(predictions, lambda p: p.difficulty),
        by_effective_year=_grouped(predictions, lambda p: p.effective_year),
        by_hops=_grouped(predictions, lambda p: p.hops),
    )


# --- compositionality gap ----------------------------------------------------------------


def compositionality_gap(
    composed: dict[str, bool], sub_questions: dict[str, list[bool]]
) -> GapResult:
    """`composed`: item id -> composed question right; `sub_questions`: item id -> each of its
    sub-questions right. Among items whose sub-questions are all right, the share whose
    composed question is wrong."""
    qualifying = [
        item for item, subs in sub_questions.items() if subs and all(subs) and item in composed
    ]
    wrong = sum(1 for item in qualifying if not composed[item])
    return GapResult(
        items=sum(1 for item, subs in sub_questions.items() if subs and item in composed),
        subs_all_right=len(qualifying),
        subs_right_composed_right=len(qualifying) - wrong,
        subs_right_composed_wrong=wrong,
        gap=wrong / len(qualifying) if qualifying else None,
    )
