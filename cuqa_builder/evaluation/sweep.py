"""Parameter sweeps of the Self-DC paper's section 6: alpha with beta fixed (Figure 4), beta with
alpha fixed (Figure 5), the depth t (Table 3) and the number of retrieved passages (Figure 6).

Each setting is an ordinary run in `OUT/PARAM=VALUE/`. Settings run one after another through
the same cached gateway, so a call two settings share (the same prompt, e.g. the confidence of
the same question) is made once and served from the cache afterwards. `OUT/sweep.json` lists the
settings and their metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from cuqa_builder.evaluation.datasets import EvalItem
from cuqa_builder.evaluation.harness import Evaluation, evaluate
from cuqa_builder.evaluation.outputs import SWEEP, MetricsFile, SweepFile, SweepRow, write_output
from cuqa_builder.solvers.base import SolverOptions

# The paper's grids (section 6.1-6.3).
DEFAULT_VALUES: dict[str, tuple[float, ...]] = {
    "alpha": (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    "beta": (0.1, 0.2, 0.3, 0.4, 0.5),
    "depth": (2, 3, 4),
    "top-k": (1, 2, 3, 4, 5),
}
INTEGER_PARAMS = frozenset({"depth", "top-k"})


def option_field(param: str, method: str) -> str:
    """The SolverOptions field a sweep parameter sets (RA-ISF has its own depth threshold)."""
    if param == "depth":
        return "raisf_depth" if method == "ra-isf" else "depth"
    return {"alpha": "alpha", "beta": "beta", "top-k": "top_k"}[param]


def parse_values(param: str, values: Sequence[str] | None) -> list[float | int]:
    if not values:
        return list(DEFAULT_VALUES[param])
    kind = int if param in INTEGER_PARAMS else float
    return [kind(v) for v in values]


def setting_dir(out: Path, param: str, value: float | int) -> Path:
    return out / f"{param}={value:g}"


async def sweep(
    evaluation: Evaluation, items: Sequence[EvalItem], out: Path, param: str,
    values: Sequence[float | int],
) -> list[SweepRow]:
    field = option_field(param, evaluation.settings.method)
    # Every value is checked before the first run, so a bad one cannot end a long sweep midway.
    grid = [
        SolverOptions.checked(**{**evaluation.options.model_dump(), field: value})
        for value in values
    ]
    report = SweepFile(param=param, run=evaluation.settings)
    for value, options in zip(values, grid, strict=True):
        settings = evaluation.settings.model_copy(update={"options": options})
        outcome = await evaluate(
            replace(evaluation, options=options, settings=settings), items,
            setting_dir(out, param, value),
        )
        report.settings.append(_row(value, outcome.metrics))
        # Rewritten after every setting, so a killed sweep still shows what it finished.
        write_output(out / SWEEP, report)
    return report.settings


def _row(value: float, metrics: MetricsFile) -> SweepRow:
    headline = metrics.model_dump(exclude={"run", "by_type", "by_difficulty", "by_hops"})
    return SweepRow(value=value, **headline)
