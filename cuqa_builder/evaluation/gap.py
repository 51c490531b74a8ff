"""The compositionality gap of a method (Self-Ask paper, section 2): answer every composed
question and, separately, each of its sub-questions; among the items whose sub-questions are all
right, the share whose composed question is wrong.

Both halves are ordinary evaluation runs (`OUT/composed/`, `OUT/sub-questions/`), so they
resume like any run; `OUT/gap.json` holds the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from cuqa_builder.evaluation.datasets import EvalItem
from cuqa_builder.evaluation.harness import (
    EvalError,
    Evaluation,
    Outcome,
    evaluate,
    load_predictions,
)
from cuqa_builder.evaluation.metrics import compositionality_gap
from cuqa_builder.evaluation.outputs import GAP, GapFile, GapResult, write_output

COMPOSED_DIR = "composed"
SUB_QUESTIONS_DIR = "sub-questions"


def sub_question_items(items: Sequence[EvalItem]) -> list[EvalItem]:
    """Each sub-question as a question of its own; its type is its kind (known/unknown)."""
    return [
        EvalItem(
            id=f"{item.id}/sub{n}", question=sub.question, answers=[sub.answer], type=sub.kind,
            difficulty=item.difficulty, meta={"parent": item.id},
        )
        for item in items
        for n, sub in enumerate(item.sub_questions, start=1)
    ]


async def evaluate_gap(
    evaluation: Evaluation, items: Sequence[EvalItem], out: Path
) -> tuple[GapResult, Outcome, Outcome]:
    composed = [item for item in items if item.sub_questions]
    if not composed:
        raise EvalError("no item has sub-questions: the gap needs CuQA-style items")
    subs = sub_question_items(composed)
    settings = evaluation.settings.model_copy(update={"part": "composed"})
    whole = await evaluate(replace(evaluation, settings=settings), composed, out / COMPOSED_DIR)
    settings = evaluation.settings.model_copy(update={"part": "sub-questions"})
    parts = await evaluate(replace(evaluation, settings=settings), subs, out / SUB_QUESTIONS_DIR)

    wanted = {item.id for item in composed}
    composed_right = {
        p.id: p.correct for p in load_predictions(out / COMPOSED_DIR) if p.id in wanted
    }
    parent_of = {item.id: item.meta["parent"] for item in subs}
    subs_right: dict[str, list[bool]] = defaultdict(list)
    for p in load_predictions(out / SUB_QUESTIONS_DIR):
        if p.id in parent_of:
            subs_right[parent_of[p.id]].append(p.correct)
    # An item counts only once every one of its sub-questions has a prediction.
    expected = {item.id: len(item.sub_questions) for item in composed}
    complete = {k: v for k, v in subs_right.items() if len(v) == expected[k]}
    result = compositionality_gap(composed_right, complete)
    judged_by = "judge" if evaluation.judge_gateway is not None else "exact match"
    write_output(out / GAP, GapFile(run=evaluation.settings, correct_by=judged_by,
                                    **result.model_dump()))
    return result, whole, parts
