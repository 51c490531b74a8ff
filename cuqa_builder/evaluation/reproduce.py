"""`cuqa-eval reproduce TABLE`: the methods of one of the Self-DC paper's result tables, each
with the paper's settings (section 5.2: top 3 results, depth t = 3, temperature and top_p 0.1;
alpha and beta as section 6.1 found best), one ordinary run per row in `OUT/ROW/`, then a report
laid out like the table, with the paper's figures beside ours.

Table 1 and Table 12 are gpt-3.5-turbo-1106 on CuQA and FreshQA; Tables 2 and 13 are
gpt-3.5-turbo-instruct (the completions API), which the paper ran without Self-DC (prob).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from cuqa_builder.evaluation.datasets import EvalItem
from cuqa_builder.evaluation.harness import Evaluation, Outcome, evaluate
from cuqa_builder.solvers import NO_RETRIEVAL, get_solver
from cuqa_builder.solvers.base import SolverOptions


@dataclass(frozen=True)
class Row:
    label: str  # as the paper's table names it
    method: str
    paper: tuple[float, float, float]  # the paper's EM, F1, Acc
    confidence: Literal["verb", "prob"] = "verb"

    @property
    def slug(self) -> str:
        return self.method if self.method != "self-dc" else f"self-dc-{self.confidence}"


@dataclass(frozen=True)
class TableSpec:
    name: str
    caption: str
    api: Literal["chat", "completions"]
    alpha_verb: float
    alpha_prob: float
    rows: tuple[Row, ...]
    beta: float = 0.1

    def options(self, row: Row) -> SolverOptions:
        """Section 5.2's settings (SolverOptions' defaults) with the row's alpha and beta, and
        Self-DC's sub-questions asked as written (Figure 3)."""
        alpha = self.alpha_prob if row.confidence == "prob" else self.alpha_verb
        options = SolverOptions(confidence=row.confidence, alpha=alpha, beta=self.beta)
        if row.method == "self-dc":
            return options.model_copy(update={"self_dc_dependent": "literal"})
        return options


BASELINES = (
    ("Direct", "direct"), ("CoT", "cot"), ("Few-shot-CoT", "fewshot-cot"),
    ("GenRead", "genread"), ("RR", "rr"), ("REFEED", "refeed"), ("IRCoT", "ircot"),
    ("Self-Ask", "self-ask"), ("ITER-RETGEN", "iter-retgen"),
)


def _rows(figures: Sequence[tuple[float, float, float]]) -> tuple[Row, ...]:
    """The baselines in the table's order, then Self-DC (verb) and, when listed, (prob)."""
    baselines = zip(BASELINES, figures[:len(BASELINES)], strict=True)
    rows = [Row(label, method, paper) for (label, method), paper in baselines]
    rows.append(Row("Self-DC (verb)", "self-dc", figures[len(BASELINES)]))
    if len(figures) > len(BASELINES) + 1:
        rows.append(Row("Self-DC (prob)", "self-dc", figures[-1], confidence="prob"))
    return tuple(rows)


# The paper's EM, F1 and Acc per row; alpha for verb/prob confidence from section 6.1 (1106:
# 0.4 verb, 0.6 prob; instruct: 0.8 verb), beta 0.1 (footnote 12).
TABLES = {
    "table1": TableSpec("Table 1", "CuQA, gpt-3.5-turbo-1106", "chat", 0.4, 0.6, _rows([
        (15.4, 12.4, 30.8), (13.8, 12.2, 28.9), (10.3, 2.3, 16.2), (11.1, 8.8, 25.7),
        (15.0, 14.0, 31.2), (13.4, 4.2, 30.8), (19.0, 7.6, 34.8), (7.9, 2.9, 11.1),
        (9.9, 2.5, 14.2), (17.8, 15.9, 35.6), (17.4, 15.2, 36.4)])),
    "table2": TableSpec("Table 2", "CuQA, gpt-3.5-turbo-instruct", "completions", 0.8, 0.8,
                        _rows([
        (13.0, 5.8, 25.3), (15.0, 6.0, 24.9), (19.4, 4.4, 31.2), (16.6, 9.6, 26.9),
        (11.9, 7.3, 25.7), (6.7, 4.5, 26.5), (17.4, 9.7, 30.8), (7.1, 7.4, 24.9),
        (9.9, 6.7, 28.5), (21.1, 9.4, 35.1)])),
    "table12": TableSpec("Table 12", "FreshQA, gpt-3.5-turbo-1106", "chat", 0.4, 0.6, _rows([
        (21.3, 21.5, 36.5), (20.8, 21.6, 36.0), (18.7, 11.9, 31.6), (18.2, 17.1, 36.3),
        (36.0, 32.4, 61.8), (23.2, 14.3, 39.0), (37.5, 16.5, 60.3), (11.5, 14.8, 29.8),
        (25.7, 13.3, 37.5), (35.2, 27.1, 56.0), (36.8, 31.4, 62.0)])),
    "table13": TableSpec("Table 13", "FreshQA, gpt-3.5-turbo-instruct", "completions", 0.8,
                         0.8, _rows([
        (19.0, 8.2, 38.3), (17.8, 7.5, 38.3), (23.3, 13.4, 42.0), (21.5, 7.8, 36.3),
        (33.0, 12.1, 53.8), (19.2, 10.1, 35.7), (32.8, 21.2, 56.5), (13.8, 16.2, 36.7),
        (14.5, 16.0, 43.8), (25.2, 19.5, 52.1)])),
}


async def reproduce(
    evaluation: Evaluation, items: Sequence[EvalItem], out: Path, spec: TableSpec
) -> list[tuple[Row, Outcome]]:
    """Every row of `spec` as its own run in `out/ROW/`, through the same cached gateway (a
    call two rows share, such as Self-DC's generate step, is paid once)."""
    done = []
    for row in spec.rows:
        options = spec.options(row)
        retriever_info = None if row.method in NO_RETRIEVAL else evaluation.settings.retriever
        settings = evaluation.settings.model_copy(
            update={"method": row.method, "options": options, "retriever": retriever_info})
        run = replace(evaluation, solver=get_solver(row.method), options=options,
                      settings=settings)
        done.append((row, await evaluate(run, items, out / row.slug)))
    return done
