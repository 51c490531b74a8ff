"""EM/F1 on hand-computed cases, the aggregates of metrics.json, and the compositionality gap."""

from __future__ import annotations

import pytest

from cuqa_builder.evaluation.metrics import (
    compositionality_gap,
    cover_match,
    exact_match,
    f1_score,
    metrics,
    summarize,
)
from cuqa_builder.evaluation.outputs import EvalSettings, Prediction
from cuqa_builder.solvers.base import SolverOptions

RUN = EvalSettings(method="direct", options=SolverOptions(), model="m", data="d.jsonl")


@pytest.mark.parametrize(
    ("prediction", "golds", "em"),
    [
        ("The Eiffel Tower!", ["eiffel tower"], 1.0),  # case, article, punctuation
        ("  Rishi   Sunak. ", ["Rishi Sunak"], 1.0),  # whitespace
        ("“Oppenheimer”", ["Oppenheimer"], 1.0),  # typographic quotes
        ("Paris", ["London", "paris, France", "PARIS"], 1.0),  # any gold of several
        ("Paris, France", ["Paris"], 0.0),  # EM is exact after normalisation
        ("", ["Paris"], 0.0),  # empty prediction
        ("The", ["Paris"], 0.0),  # normalises to nothing
        ("Paris", [], 0.0),  # no gold
    ],
)
def test_exact_match(prediction: str, golds: list[str], em: float) -> None:
    assert exact_match(prediction, golds) == em


def test_f1_is_token_overlap_after_normalisation() -> None:
    # pred [capital, city, of, france] vs gold [paris, france]: 1 common, P=1/4, R=1/2 -> 1/3
    assert f1_score("the capital city of France", ["Paris France"]) == pytest.approx(1 / 3)


def test_f1_takes_the_best_gold_or_alias() -> None:
    # second gold [capital, of, france]: 3 common, P=3/4, R=1 -> 6/7
    golds = ["Paris France", "the capital of France"]
    assert f1_score("the capital city of France", golds) == pytest.approx(6 / 7)


def test_f1_counts_repeated_tokens_once_per_occurrence() -> None:
    # pred [new, new, york] vs gold [new, york]: common = min counts = 2, P=2/3, R=1 -> 0.8
    assert f1_score("new new york", ["New York"]) == pytest.approx(0.8)


def test_f1_of_empty_prediction_is_zero() -> None:
    assert f1_score("", ["Paris"]) == 0.0
    assert f1_score("a an the", ["Paris"]) == 0.0


@pytest.mark.parametrize(
    ("prediction", "gold", "em", "f1"),
    [
        ("Yes, it was held at Bletchley Park.", "yes", 1.0, 1.0),
        ("No.", "No", 1.0, 1.0),
        ("no, it took place in the UK", "yes", 0.0, 0.0),
        ("Yes", "no", 0.0, 0.0),
        # not a yes/no gold: the leading "No" is part of the answer
        ("No Man's Sky", "No Man's Sky", 1.0, 1.0),
        # prediction [no, doubt, it, was, paris] vs [paris]: P=1/5, R=1 -> 1/3
        ("No doubt it was Paris", "Paris", 0.0, 1 / 3),
        # a yes/no gold with a prediction that says neither
        ("It did", "yes", 0.0, 0.0),
    ],
)
def test_yes_no_first_word_option(prediction: str, gold: str, em: float, f1: float) -> None:
    assert exact_match(prediction, [gold], yes_no_first_word=True) == em
    assert f1_score(prediction, [gold], yes_no_first_word=True) == pytest.approx(f1)


def test_without_the_yes_no_option_em_is_strict() -> None:
    assert exact_match("Yes, it was held at Bletchley Park.", ["yes"]) == 0.0
    # [yes, it, was, held, at, bletchley, park] vs [yes]: P=1/7, R=1 -> 1/4
    assert f1_score("Yes, it was held at Bletchley Park.", ["yes"]) == pytest.approx(0.25)
    assert exact_match("No.", ["No"]) == 1.0


@pytest.mark.parametrize(
    ("prediction", "golds", "cover"),
    [
        ("It was held at Bletchley Park, England.", ["Bletchley Park"], 1.0),
        ("Yes, it was held at Bletchley Park.", ["yes"], 1.0),
        ("The answer is the United Kingdom", ["UK", "United Kingdom"], 1.0),  # any gold
        ("Parisian", ["Paris"], 0.0),  # whole words only
        ("Delhi", ["New Delhi"], 0.0),  # the gold must be contained, not the prediction
        ("", ["Paris"], 0.0),
        ("the", ["The"], 0.0),  # a gold that normalises to nothing never matches
    ],
)
def test_cover_em_is_the_papers_em(prediction: str, golds: list[str], cover: float) -> None:
    assert cover_match(prediction, golds) == cover


def test_cover_em_can_exceed_squad_f1() -> None:
    # The paper's tables have EM > F1, which only a containment EM allows.
    prediction, gold = "It took place at Bletchley Park in the United Kingdom", ["Bletchley Park"]
    assert cover_match(prediction, gold) == 1.0
    assert exact_match(prediction, gold) == 0.0 and f1_score(prediction, gold) < 0.5


def _prediction(id: str, em: float, f1: float, **extra) -> Prediction:
    return Prediction(id=id, question="q?", answers=["a"], prediction="p", em=em, f1=f1, **extra)


def test_summary_means_and_totals() -> None:
    predictions = [
        _prediction("1", 1.0, 1.0, acc=True, retrieval_calls=2, llm_calls=3,
                    prompt_tokens=10, completion_tokens=2, cost=0.5, type="AAB",
                    difficulty="easy"),
        _prediction("2", 0.0, 0.5, acc=False, retrieval_calls=0, llm_calls=1,
                    prompt_tokens=4, completion_tokens=0, cost=0.25, type="ABC",
                    difficulty="easy"),
        _prediction("3", 0.0, 0.0, acc=True, retrieval_calls=1, llm_calls=2,
                    prompt_tokens=6, completion_tokens=2, cost=0.0, type="ABC",
                    difficulty="hard"),
    ]
    m = metrics(predictions, RUN, complete=True).model_dump()
    assert m["n"] == 3
    assert m["em"] == pytest.approx(1 / 3)
    assert m["f1"] == pytest.approx(0.5)
    assert m["acc"] == pytest.approx(2 / 3)
    assert m["retrieval_calls"] == {"mean": 1.0, "total": 3}
    assert m["llm_calls"] == {"mean": 2.0, "total": 6}
    assert m["tokens"] == {"mean": 8.0, "total": 24}
    assert m["cost"]["total"] == pytest.approx(0.75)
    assert set(m["by_type"]) == {"AAB", "ABC"}
    assert m["by_type"]["ABC"]["n"] == 2
    assert m["by_type"]["ABC"]["f1"] == pytest.approx(0.25)
    assert m["by_type"]["ABC"]["acc"] == pytest.approx(0.5)
    assert m["by_difficulty"]["easy"]["em"] == pytest.approx(0.5)
    assert m["by_difficulty"]["hard"]["retrieval_calls"] == {"mean": 1.0, "total": 1}
    assert (m["run"]["method"], m["complete"]) == ("direct", True)


def test_acc_is_none_without_a_judge_and_empty_runs_are_zero() -> None:
    assert summarize([_prediction("1", 1.0, 1.0)]).acc is None
    empty = summarize([])
    assert (empty.n, empty.em, empty.acc) == (0, 0.0, None)


def test_correct_is_the_judge_verdict_else_exact_match() -> None:
    assert _prediction("1", 0.0, 0.2, acc=True).correct
    assert not _prediction("2", 1.0, 1.0, acc=False).correct
    assert _prediction("3", 1.0, 1.0).correct
    assert not _prediction("4", 0.0, 0.9).correct


def test_compositionality_gap() -> None:
    composed = {"a": False, "b": True, "c": False, "d": True, "f": False}
    sub_questions = {
        "a": [True, True],  # all right, composed wrong -> in the gap
        "b": [True, True],  # all right, composed right
        "c": [True, False],  # a sub-question wrong: does not qualify
        "d": [],  # no sub-questions: not an item of the gap
        "e": [True],  # no composed answer: not counted
        "f": [True, True, True],  # all right, composed wrong
    }
    result = compositionality_gap(composed, sub_questions)
    assert result.items == 4
    assert result.subs_all_right == 3
    assert result.subs_right_composed_wrong == 2
    assert result.subs_right_composed_right == 1
    assert result.gap == pytest.approx(2 / 3)


def test_gap_is_undefined_when_no_item_qualifies() -> None:
    assert compositionality_gap({"a": True}, {"a": [False]}).gap is None
