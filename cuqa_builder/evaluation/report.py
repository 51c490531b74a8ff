"""A Markdown report over run directories: a table shaped like the Self-DC paper's Table 1
(methods x EM/F1/Acc, with retrieval calls), the per-type/difficulty breakdown (Table 4), the
sweeps (Table 3 and PNG plots shaped like Figures 4-6) and compositionality gaps.

A directory is recognised by what it holds: `metrics.json` (a run), `sweep.json` (a sweep),
`gap.json` (a gap run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# The object API renders straight to files: no pyplot, no GUI backend, no global state.
from matplotlib.figure import Figure

from cuqa_builder.errors import CuqaError
from cuqa_builder.evaluation.outputs import (
    GAP,
    METRICS,
    SWEEP,
    EvalSettings,
    GapFile,
    MetricsFile,
    Scores,
    SweepFile,
    read_output,
)
from cuqa_builder.evaluation.sweep import option_field
from cuqa_builder.jsonio import atomic_write_text
from cuqa_builder.solvers import METHODS, NO_RETRIEVAL

# Table 1's names.
DISPLAY_NAMES = {
    "direct": "Direct", "cot": "CoT", "fewshot-cot": "Few-shot-CoT", "genread": "GenRead",
    "rr": "RR", "refeed": "REFEED", "ircot": "IRCoT", "self-ask": "Self-Ask",
    "iter-retgen": "ITER-RETGEN", "self-dc": "Self-DC", "ra-isf": "RA-ISF",
}
# Cover-EM is the paper's EM (a gold answer contained in the prediction); EM/F1 are SQuAD's.
METRIC_NAMES = (("cover_em", "Cover-EM"), ("em", "EM"), ("f1", "F1"), ("acc", "Acc"))
SCORES_NOTE = (
    "Scores in %. **Cover-EM** is the Self-DC paper's EM (a gold answer contained in the "
    "prediction, normalised): compare it with the EM column of the paper's Tables 1-4, 12 and "
    "13. **EM** and **F1** are SQuAD's exact match and token F1: compare F1 with the paper's F1. "
    "**Acc** is the LLM judge's verdict (the paper's Acc). Retrieval and LLM calls per question."
)
SHOWN_OPTIONS = ("confidence", "alpha", "beta", "depth", "top_k")


class ReportError(CuqaError, ValueError):
    pass


@dataclass
class Found:
    runs: list[tuple[Path, MetricsFile]] = field(default_factory=list)
    sweeps: list[tuple[Path, SweepFile]] = field(default_factory=list)
    gaps: list[tuple[Path, GapFile]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "PATH: why", for the user


def _nothing_in(path: Path) -> str:
    if not path.exists():
        return f"{path}: does not exist"
    if not path.is_dir():
        return f"{path}: not a directory"
    return f"{path}: holds no {METRICS}, {SWEEP} or {GAP}"


def collect(dirs: Sequence[Path]) -> Found:
    """Results of every directory; one without any is skipped (a glob such as `evals/*` also
    matches an earlier report and unfinished runs), unless no directory has results at all."""
    found = Found()
    for directory in dirs:
        hit = False
        if (directory / METRICS).is_file():
            found.runs.append((directory, read_output(directory / METRICS, MetricsFile)))
            hit = True
        if (directory / SWEEP).is_file():
            found.sweeps.append((directory, read_output(directory / SWEEP, SweepFile)))
            hit = True
        if (directory / GAP).is_file():
            found.gaps.append((directory, read_output(directory / GAP, GapFile)))
            hit = True
        if not hit:
            found.skipped.append(_nothing_in(directory))
    if not (found.runs or found.sweeps or found.gaps):
        raise ReportError("nothing to report: " + "; ".join(found.skipped))
    return found


# --- labels and numbers ------------------------------------------------------------------


def method_label(run: EvalSettings, with_model: bool) -> str:
    label = DISPLAY_NAMES.get(run.method, run.method)
    if run.method == "self-dc":
        label += f" ({run.options.confidence})"
    return f"{label} [{run.model}]" if with_model else label


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _scores(m: Scores) -> list[str]:
    return [_pct(getattr(m, key)) for key, _ in METRIC_NAMES]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


# --- sections ----------------------------------------------------------------------------


def main_table(runs: list[tuple[Path, MetricsFile]]) -> list[str]:
    with_model = len({m.run.model for _, m in runs}) > 1
    order = list(METHODS)  # Table 1's order

    def rank(entry: tuple[Path, MetricsFile]) -> tuple[int, int, str]:
        method = entry[1].run.method
        group = 0 if method in NO_RETRIEVAL else 1
        return group, order.index(method) if method in order else len(order), str(entry[0])

    rows = []
    for group_name, in_group in (("w/o retrieval", True), ("w/ retrieval", False)):
        members = [e for e in sorted(runs, key=rank)
                   if (e[1].run.method in NO_RETRIEVAL) == in_group]
        if members:
            rows.append([f"*{group_name}*"] + [""] * (len(METRIC_NAMES) + 4))
        for _, m in members:
            calls = m.retrieval_calls
            rows.append([
                method_label(m.run, with_model), *_scores(m),
                f"{calls.mean:.2f}", f"{calls.total:g}",
                f"{m.llm_calls.mean:.2f}", f"{m.n}" + ("" if m.complete else "*"),
            ])
    header = ["Method", *(name for _, name in METRIC_NAMES), "Retrieval/q", "Retrieval total",
              "LLM calls/q", "n"]
    lines = ["## Results", "", *_table(header, rows), ""]
    if any(not m.complete for _, m in runs):
        lines += ["\\* unfinished run: re-run it to complete it.", ""]
    return lines


def breakdown_table(runs: list[tuple[Path, MetricsFile]]) -> list[str]:
    with_model = len({m.run.model for _, m in runs}) > 1
    rows = []
    for _, m in runs:
        for groups in (m.by_type, m.by_difficulty):
            for group, g in groups.items():
                rows.append([method_label(m.run, with_model), group, str(g.n), *_scores(g),
                             f"{g.retrieval_calls.mean:.2f}"])
    if not rows:
        return []
    header = ["Method", "Group", "n", *(name for _, name in METRIC_NAMES), "Retrieval/q"]
    return ["## By type and difficulty", "", *_table(header, rows), ""]


def sweep_sections(sweeps: list[tuple[Path, SweepFile]], report: Path) -> list[str]:
    lines: list[str] = []
    for param in sorted({s.param for _, s in sweeps}):
        members = [(p, s) for p, s in sweeps if s.param == param]
        lines += [f"## Sweep over {param}", ""]
        for path, s in members:
            swept = option_field(param, s.run.method)
            fixed = ", ".join(f"{k}={v}" for k, v in s.run.options.model_dump().items()
                              if k in SHOWN_OPTIONS and k != swept)
            lines += [f"`{path}`: {method_label(s.run, True)}; fixed: {fixed}", ""]
            rows = [[f"{r.value:g}", *_scores(r), f"{r.retrieval_calls.total:g}",
                     str(r.n)] for r in s.settings]
            header = [param, *(name for _, name in METRIC_NAMES), "Retrieval total", "n"]
            lines += [*_table(header, rows), ""]
        image = plot_sweep(param, members, report.with_name(f"{report.stem}-{param}.png"))
        lines += [f"![{param} sweep]({image.name})", ""]
    return lines


def plot_sweep(param: str, members: list[tuple[Path, SweepFile]], path: Path) -> Path:
    """One panel per metric, one line per sweep (model and confidence type), as Figures 4-6."""
    metrics = [(k, name) for k, name in METRIC_NAMES
               if any(getattr(r, k) is not None for _, s in members for r in s.settings)]
    fig = Figure(figsize=(4.2 * len(metrics), 3.4))
    axes = fig.subplots(1, len(metrics), squeeze=False)
    for axis, (key, name) in zip(axes[0], metrics, strict=True):
        for _, s in members:
            points = [(r.value, 100 * getattr(r, key)) for r in s.settings
                      if getattr(r, key) is not None]
            if points:
                xs, ys = zip(*sorted(points), strict=True)
                axis.plot(xs, ys, marker="o", label=method_label(s.run, True))
        axis.set_xlabel(param)
        axis.set_ylabel(name)
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def gap_table(gaps: list[tuple[Path, GapFile]]) -> list[str]:
    rows = [[method_label(g.run, True), str(g.items), str(g.subs_all_right),
             str(g.subs_right_composed_wrong), _pct(g.gap), g.correct_by]
            for _, g in gaps]
    header = ["Method", "Items", "Sub-questions all right", "…and composed wrong", "Gap",
              "Correct by"]
    return ["## Compositionality gap", "", *_table(header, rows), ""]


def write_report(dirs: Sequence[Path], out: Path) -> list[str]:
    """Write the report to `out`; returns the inputs skipped, with why."""
    found = collect(dirs)
    lines = ["# CuQA evaluation report", "", SCORES_NOTE, ""]
    if found.runs:
        lines += main_table(found.runs) + breakdown_table(found.runs)
    if found.sweeps:
        lines += sweep_sections(found.sweeps, out)
    if found.gaps:
        lines += gap_table(found.gaps)
    atomic_write_text(out, "\n".join(lines))
    return found.skipped
