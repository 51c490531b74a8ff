"""A Markdown report over run directories: a table shaped like the Self-DC paper's Table 1
(methods x Cover-EM/EM/F1/Acc, with retrieval calls), the per-type/difficulty breakdown
(Table 4), Self-DC's routes and confidences (section 6.4), FreshQA's statistics and accuracy by
effective year and hops (Table 11, Figure 7), the sweeps (Table 3 and PNG plots shaped like
Figures 4-6) and compositionality gaps.

A directory is recognised by what it holds: `metrics.json` (a run), `sweep.json` (a sweep),
`gap.json` (a gap run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cuqa_builder.errors import CuqaError
from cuqa_builder.evaluation.analyses import (
    CONFIDENCE_BINS,
    FRESHQA_HOPS,
    FRESHQA_YEARS,
    SELF_DC_BRANCHES,
    confidence_histogram,
    headline,
    ordered_groups,
    route_shares,
)
from cuqa_builder.evaluation.harness import load_predictions
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
from cuqa_builder.evaluation.plots import Line, Panel, bar_panels, line_panels
from cuqa_builder.evaluation.reproduce import Row, TableSpec
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
        # "#k filled" is our deviation from Figure 3 (--self-dc-dependent), so it is named.
        filled = ", #k filled" if run.options.self_dc_dependent == "fill" else ""
        label += f" ({run.options.confidence}{filled})"
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
        by_year = [(p, s) for p, s in members if any(r.by_effective_year for r in s.settings)]
        if by_year:
            image = plot_sweep_by_year(param, by_year,
                                       report.with_name(f"{report.stem}-{param}-years.png"))
            lines += [f"![{param} sweep by effective year]({image.name})", ""]
    return lines


def plot_sweep(param: str, members: list[tuple[Path, SweepFile]], path: Path) -> Path:
    return line_panels(param, sweep_panels(members), path)


def sweep_panels(members: list[tuple[Path, SweepFile]]) -> list[Panel]:
    """As Figures 4-6: accuracy in % (from 0) beside the retrieval calls, against the swept
    parameter, one line per sweep (model and confidence type)."""
    accuracy, retrieval = [], []
    names = set()
    for _, s in members:
        rows = sorted(s.settings, key=lambda r: r.value)
        label = method_label(s.run, True)
        scores = [headline(r) for r in rows]
        names.update(name for _, name in scores)
        accuracy.append(Line(label, [r.value for r in rows], [100 * v for v, _ in scores]))
        retrieval.append(Line(label, [r.value for r in rows],
                              [r.retrieval_calls.total for r in rows]))
    name = " / ".join(sorted(names))
    return [Panel(f"{name} (%)", f"{name} (%)", accuracy),
            Panel("Retrieval calls", "retrieval calls (total)", retrieval, percent=False)]


def plot_sweep_by_year(param: str, members: list[tuple[Path, SweepFile]], path: Path) -> Path:
    """As Figure 7: one panel per sweep (confidence type), one line per effective year."""
    panels = []
    for _, s in members:
        rows = sorted(s.settings, key=lambda r: r.value)
        years = ordered_groups({y: g for r in rows for y, g in r.by_effective_year.items()},
                               FRESHQA_YEARS)
        lines = []
        for year in years:
            points = [(r.value, 100 * headline(r.by_effective_year[year])[0]) for r in rows
                      if year in r.by_effective_year]
            lines.append(Line(year, [x for x, _ in points], [y for _, y in points]))
        name = headline(rows[0])[1] if rows else "Acc"
        panels.append(Panel(method_label(s.run, True), f"{name} (%)", lines))
    return line_panels(param, panels, path)


# --- section 6.4 and FreshQA -------------------------------------------------------------


def route_sections(runs: list[tuple[Path, MetricsFile]], report: Path) -> list[str]:
    """Self-DC's first decision per question, its accuracy, and the confidence histogram."""
    with_model = len({m.run.model for _, m in runs}) > 1
    route_rows, bins_rows, histograms = [], [], []
    for path, m in runs:
        if m.run.method != "self-dc":
            continue
        predictions = load_predictions(path)
        shares = route_shares(predictions)
        label = method_label(m.run, with_model)
        for branch in SELF_DC_BRANCHES if shares else ():
            share = shares[branch]
            route_rows.append([label, branch, str(share.questions), _pct(share.share),
                               _pct(share.cover_em), _pct(share.acc), str(share.decisions)])
        counts = confidence_histogram(predictions)
        total = sum(counts.values())
        if total:
            fractions = [counts[b] / total for b in CONFIDENCE_BINS]
            bins_rows.append([label, str(total), *(_pct(f) for f in fractions)])
            histograms.append((label, [100 * f for f in fractions]))
    if not route_rows:
        return []
    lines = ["## Self-DC: routes and confidences (section 6.4)", "",
             "Each question's first decision (sub-questions decide again: *decisions* counts "
             "every decision of the branch, at any depth), and the accuracy of the questions "
             "sent down each branch.", "",
             *_table(["Method", "Route", "Questions", "Share", "Cover-EM", "Acc",
                      "Decisions"], route_rows), ""]
    if bins_rows:
        image = bar_panels(CONFIDENCE_BINS, histograms, "questions (%)",
                           report.with_name(f"{report.stem}-confidence.png"),
                           title="Confidence of each question (%)")
        lines += ["Distribution of the questions' confidences (whole percent; % of questions):",
                  "", *_table(["Method", "n", *CONFIDENCE_BINS], bins_rows), "",
                  f"![confidence histogram]({image.name})", ""]
    return lines


def freshqa_sections(runs: list[tuple[Path, MetricsFile]], report: Path) -> list[str]:
    fresh = [(p, m) for p, m in runs if m.by_effective_year or m.by_hops]
    if not fresh:
        return []
    first = fresh[0][1]
    hops = ordered_groups(first.by_hops, FRESHQA_HOPS)
    years = ordered_groups(first.by_effective_year, FRESHQA_YEARS)
    stats = [*(str(first.by_hops[h].n) for h in hops),
             *(str(first.by_effective_year[y].n) for y in years), str(first.n)]
    lines = ["## FreshQA: statistics (Table 11) and accuracy by effective year and hops "
             "(Figure 7)", "", *_table([*hops, *years, "total"], [stats]), ""]
    with_model = len({m.run.model for _, m in fresh}) > 1
    rows, bars = [], []
    for _, m in fresh:
        groups = [*(m.by_effective_year.get(y) for y in years), *(m.by_hops.get(h) for h in hops)]
        values = [None if g is None else headline(g) for g in groups]
        name = headline(m)[1]
        rows.append([method_label(m.run, with_model), name,
                     *(_pct(v[0]) if v else "–" for v in values)])
        bars.append((method_label(m.run, with_model),
                     [100 * v[0] if v else 0.0 for v in values[:len(years)]]))
    image = bar_panels(years, bars, "accuracy (%)",
                       report.with_name(f"{report.stem}-freshqa-years.png"),
                       title="Accuracy by effective year (Acc, else Cover-EM)")
    lines += [*_table(["Method", "Score", *years, *hops], rows), "",
              f"![FreshQA accuracy by effective year]({image.name})", ""]
    return lines


def gap_table(gaps: list[tuple[Path, GapFile]]) -> list[str]:
    rows = [[method_label(g.run, True), str(g.items), str(g.subs_all_right),
             str(g.subs_right_composed_wrong), _pct(g.gap), g.correct_by]
            for _, g in gaps]
    header = ["Method", "Items", "Sub-questions all right", "…and composed wrong", "Gap",
              "Correct by"]
    return ["## Compositionality gap", "", *_table(header, rows), ""]


def table_report(spec: TableSpec, results: Sequence[tuple[Row, MetricsFile]]) -> str:
    """A reproduction laid out like the paper's table: its rows in its order and groups, our
    Cover-EM (the paper's EM), EM, F1 and Acc, the retrieval calls, and the paper's figures."""
    # The settings shared by every row; the retriever from a row that retrieves.
    settings = results[-1][1].run if results else None
    rows = []
    for group_name, in_group in (("w/o retrieval", True), ("w/ retrieval", False)):
        rows.append([f"*{group_name}*"] + [""] * 9)
        for row, m in results:
            if (row.method in NO_RETRIEVAL) != in_group:
                continue
            em, f1, acc = row.paper
            rows.append([row.label, _pct(m.cover_em), _pct(m.em), _pct(m.f1), _pct(m.acc),
                         f"{m.retrieval_calls.mean:.2f}",
                         f"{m.n}" + ("" if m.complete else "*"), f"{em:.1f}", f"{f1:.1f}",
                         f"{acc:.1f}"])
    header = ["Method", "Cover-EM", "EM (SQuAD)", "F1", "Acc", "Retrieval/q", "n",
              "Paper EM", "Paper F1", "Paper Acc"]
    lines = [f"# {spec.name} reproduced ({spec.caption})", "", SCORES_NOTE, ""]
    if settings is not None:
        judge = settings.judge_model or "none (no Acc)"
        retriever = settings.retriever.name if settings.retriever else "none"
        lines += [f"Model `{settings.model}` ({settings.api} API), judge `{judge}`, "
                  f"retriever `{retriever}`, top-k {settings.options.top_k}, depth t "
                  f"{settings.options.depth}, temperature {settings.options.temperature:g}, "
                  f"top_p {settings.options.top_p:g}; Self-DC alpha {spec.alpha_verb:g} "
                  f"(verb) / {spec.alpha_prob:g} (prob), beta {spec.beta:g}. The paper's "
                  "columns are its own figures (its EM is our Cover-EM).", ""]
    lines += _table(header, rows)
    if any(not m.complete for _, m in results):
        lines += ["", "\\* unfinished run: re-run the same command to complete it."]
    return "\n".join(lines) + "\n"


def write_report(dirs: Sequence[Path], out: Path) -> list[str]:
    """Write the report to `out`; returns the inputs skipped, with why."""
    found = collect(dirs)
    lines = ["# CuQA evaluation report", "", SCORES_NOTE, ""]
    if found.runs:
        lines += main_table(found.runs) + breakdown_table(found.runs)
        lines += route_sections(found.runs, out) + freshqa_sections(found.runs, out)
    if found.sweeps:
        lines += sweep_sections(found.sweeps, out)
    if found.gaps:
        lines += gap_table(found.gaps)
    atomic_write_text(out, "\n".join(lines))
    return found.skipped
