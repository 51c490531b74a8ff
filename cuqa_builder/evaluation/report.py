"""A Markdown report over run directories: a table shaped like the Self-DC paper's Table 1
(methods x EM/F1/Acc, with retrieval calls), the per-type/difficulty breakdown (Table 4), the
sweeps (Table 3 and PNG plots shaped like Figures 4-6) and compositionality gaps.

A directory is recognised by what it holds: `metrics.json` (a run), `sweep.json` (a sweep),
`gap.json` (a gap run).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The object API renders straight to files: no pyplot, no GUI backend, no global state.
from matplotlib.figure import Figure

from cuqa_builder.cutoff_estimate import CutoffProbeResult
from cuqa_builder.errors import CuqaError
from cuqa_builder.evaluation.gap import GAP
from cuqa_builder.evaluation.harness import METRICS
from cuqa_builder.evaluation.sweep import SWEEP, option_field
from cuqa_builder.jsonio import atomic_write_text
from cuqa_builder.solvers import METHODS, NO_RETRIEVAL

# Table 1's names.
DISPLAY_NAMES = {
    "direct": "Direct", "cot": "CoT", "fewshot-cot": "Few-shot-CoT", "genread": "GenRead",
    "rr": "RR", "refeed": "REFEED", "ircot": "IRCoT", "self-ask": "Self-Ask",
    "iter-retgen": "ITER-RETGEN", "self-dc": "Self-DC", "ra-isf": "RA-ISF",
}
METRIC_NAMES = (("em", "EM"), ("f1", "F1"), ("acc", "Acc"))
SHOWN_OPTIONS = ("confidence", "alpha", "beta", "depth", "top_k")


class ReportError(CuqaError, ValueError):
    pass


@dataclass
class Found:
    runs: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    sweeps: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    gaps: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
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
        kinds = ((METRICS, found.runs), (SWEEP, found.sweeps), (GAP, found.gaps))
        hits = [(_read(directory / name), into)
                for name, into in kinds if (directory / name).is_file()]
        if not hits:
            found.skipped.append(_nothing_in(directory))
        for data, into in hits:
            into.append((directory, data))
    if not (found.runs or found.sweeps or found.gaps):
        raise ReportError("nothing to report: " + "; ".join(found.skipped))
    return found


def _read(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ReportError(f"{path}: not valid JSON ({exc})") from None


# --- labels and numbers ------------------------------------------------------------------


def method_label(run: dict[str, Any], with_model: bool) -> str:
    method = run.get("method", "?")
    label = DISPLAY_NAMES.get(method, method)
    if method == "self-dc":
        label += f" ({run.get('options', {}).get('confidence', 'verb')})"
    return f"{label} [{run.get('model')}]" if with_model else label


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _scores(m: dict[str, Any]) -> list[str]:
    return [_pct(m.get(key)) for key, _ in METRIC_NAMES]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


# --- sections ----------------------------------------------------------------------------


def main_table(runs: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    with_model = len({m["run"].get("model") for _, m in runs}) > 1
    order = list(METHODS)  # Table 1's order

    def rank(entry: tuple[Path, dict[str, Any]]) -> tuple[int, int, str]:
        method = entry[1]["run"].get("method", "")
        group = 0 if method in NO_RETRIEVAL else 1
        return group, order.index(method) if method in order else len(order), str(entry[0])

    rows = []
    for group_name, in_group in (("w/o retrieval", True), ("w/ retrieval", False)):
        members = [e for e in sorted(runs, key=rank)
                   if (e[1]["run"].get("method") in NO_RETRIEVAL) == in_group]
        if members:
            rows.append([f"*{group_name}*", "", "", "", "", "", "", ""])
        for _, m in members:
            calls = m["retrieval_calls"]
            rows.append([
                method_label(m["run"], with_model), *_scores(m),
                f"{calls['mean']:.2f}", f"{calls['total']:g}",
                f"{m['llm_calls']['mean']:.2f}", f"{m['n']}" + ("" if m["complete"] else "*"),
            ])
    header = ["Method", "EM", "F1", "Acc", "Retrieval/q", "Retrieval total", "LLM calls/q", "n"]
    lines = ["## Results", "", *_table(header, rows), ""]
    if any(not m["complete"] for _, m in runs):
        lines += ["\\* unfinished run: re-run it to complete it.", ""]
    return lines


def breakdown_table(runs: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    with_model = len({m["run"].get("model") for _, m in runs}) > 1
    rows = []
    for _, m in runs:
        for axis in ("by_type", "by_difficulty"):
            for group, g in m.get(axis, {}).items():
                rows.append([method_label(m["run"], with_model), group, str(g["n"]), *_scores(g),
                             f"{g['retrieval_calls']['mean']:.2f}"])
    if not rows:
        return []
    header = ["Method", "Group", "n", "EM", "F1", "Acc", "Retrieval/q"]
    return ["## By type and difficulty", "", *_table(header, rows), ""]


def sweep_sections(sweeps: list[tuple[Path, dict[str, Any]]], report: Path) -> list[str]:
    lines: list[str] = []
    for param in sorted({s["param"] for _, s in sweeps}):
        members = [(p, s) for p, s in sweeps if s["param"] == param]
        lines += [f"## Sweep over {param}", ""]
        for path, s in members:
            run = s["run"]
            swept = option_field(param, run.get("method", ""))
            fixed = ", ".join(f"{k}={v}" for k, v in run.get("options", {}).items()
                              if k in SHOWN_OPTIONS and k != swept)
            lines += [f"`{path}`: {method_label(run, True)}; fixed: {fixed}", ""]
            rows = [[f"{r['value']:g}", *_scores(r), f"{r['retrieval_calls']['total']:g}",
                     str(r["n"])] for r in s["settings"]]
            lines += [*_table([param, "EM", "F1", "Acc", "Retrieval total", "n"], rows), ""]
        image = plot_sweep(param, members, report.with_name(f"{report.stem}-{param}.png"))
        lines += [f"![{param} sweep]({image.name})", ""]
    return lines


def plot_sweep(param: str, members: list[tuple[Path, dict[str, Any]]], path: Path) -> Path:
    """One panel per metric, one line per sweep (model and confidence type), as Figures 4-6."""
    metrics = [(k, name) for k, name in METRIC_NAMES
               if any(r.get(k) is not None for _, s in members for r in s["settings"])]
    fig = Figure(figsize=(4.2 * len(metrics), 3.4))
    axes = fig.subplots(1, len(metrics), squeeze=False)
    for axis, (key, name) in zip(axes[0], metrics, strict=True):
        for _, s in members:
            points = [(r["value"], 100 * r[key]) for r in s["settings"] if r.get(key) is not None]
            if points:
                xs, ys = zip(*sorted(points), strict=True)
                axis.plot(xs, ys, marker="o", label=method_label(s["run"], True))
        axis.set_xlabel(param)
        axis.set_ylabel(name)
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def gap_table(gaps: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    rows = [[method_label(g["run"], True), str(g["items"]), str(g["subs_all_right"]),
             str(g["subs_right_composed_wrong"]), _pct(g["gap"]), g["correct_by"]]
            for _, g in gaps]
    header = ["Method", "Items", "Sub-questions all right", "…and composed wrong", "Gap",
              "Correct by"]
    return ["## Compositionality gap", "", *_table(header, rows), ""]


def write_report(dirs: Sequence[Path], out: Path) -> list[str]:
    """Write the report to `out`; returns the inputs skipped, with why."""
    found = collect(dirs)
    lines = ["# CuQA evaluation report", "",
             "EM, F1 and Acc in %; retrieval and LLM calls per question.", ""]
    if found.runs:
        lines += main_table(found.runs) + breakdown_table(found.runs)
    if found.sweeps:
        lines += sweep_sections(found.sweeps, out)
    if found.gaps:
        lines += gap_table(found.gaps)
    atomic_write_text(out, "\n".join(lines))
    return found.skipped


# --- the cutoff probe's plot (`cuqa-eval cutoff`) --------------------------------------------


def plot_cutoff_probe(result: CutoffProbeResult, path: Path) -> Path:
    """Closed-book accuracy per event month with its 95% interval, the fitted levels and the
    estimated cutoff."""
    months = [m for m in result.months if m.asked]
    fig = Figure(figsize=(max(5.0, 0.45 * len(months) + 2), 3.6))
    axis = fig.subplots()
    xs = list(range(len(months)))
    ys = [100 * m.accuracy for m in months]
    below = [100 * (m.accuracy - m.low) for m in months]
    above = [100 * (m.high - m.accuracy) for m in months]
    axis.errorbar(xs, ys, yerr=[below, above], fmt="o", capsize=3, label="accuracy (95% CI)")
    estimate = result.estimate
    position = {m.month: x for x, m in zip(xs, months, strict=True)}
    for level, name in ((estimate.known, "known"), (estimate.unseen, "unseen")):
        if level is not None:
            span = [position[level.first] - 0.4, position[level.last] + 0.4]
            axis.plot(span, [100 * level.accuracy] * 2, linestyle="--", label=f"{name} level")
    if estimate.cutoff in position:
        axis.axvline(position[estimate.cutoff] + 0.5, color="black", linewidth=1,
                     label=f"estimated cutoff {estimate.cutoff}")
    axis.set_xticks(xs, [m.month for m in months], rotation=60, fontsize="small")
    axis.set_ylim(0, 100)
    axis.set_ylabel("closed-book accuracy (%)")
    axis.set_title(f"{result.model}: accuracy by event month", fontsize="medium")
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path
