"""The paper's analyses in `cuqa-eval report`: Self-DC's routes and confidences (section 6.4),
FreshQA's statistics and accuracy by effective year and hops (Table 11, Figure 7), and sweep
plots shaped like Figures 4-6, from runs made through the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.evaluate import main
from cuqa_builder.evaluation.outputs import SWEEP, SweepFile, read_output
from cuqa_builder.evaluation.plots import line_figure
from cuqa_builder.evaluation.report import sweep_panels
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.records.events import Event
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from tests.test_eval_cli import SOURCE, read_lines
from tests.test_eval_inputs import freshqa_row, write_freshqa

PNG = b"\x89PNG\r\n\x1a\n"
Q_WINNER = "Which team won the Harbour Cup?"
Q_BRIDGE = "Who opened the Vela bridge?"
Q_TOWN = "Which town does the Harbour Cup winner come from?"
Q_SUB_TOWN = "Which town do the Gulls come from?"
CONFIDENCE = {Q_WINNER: 90, Q_BRIDGE: 0, Q_TOWN: 40, Q_SUB_TOWN: 10}


def self_dc_model(body: dict[str, Any]) -> Reply:
    """Q_WINNER is known (generate), Q_BRIDGE unknown (retrieve), Q_TOWN uncertain: it splits
    into Q_WINNER and Q_SUB_TOWN, which nobody can answer, so the combination is wrong."""
    prompt = last_user_message(body)
    question = re.findall(r"Question: (.*)", prompt)[-1] if "Question: " in prompt else ""
    if "indicate your level of confidence" in prompt:
        return Reply(f"Answer: x\nConfidence (0-100): {CONFIDENCE[question]}%")
    if "divide the question into smaller" in prompt:
        return Reply(f"#1: {Q_WINNER}, #2: {Q_SUB_TOWN}")
    if prompt.startswith("Generate a background document"):
        return Reply("The Gulls won the Harbour Cup.")
    if "Here are all related sub-questions" in prompt:
        return Reply("Port Vela")
    if "Gulls won" in prompt and question == Q_WINNER:
        return Reply("The Gulls")
    if "opened the Vela bridge" in prompt and question == Q_BRIDGE:
        return Reply("Ada Quill")
    return Reply("unknown")


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-report-0000")


def run(llm: ScriptedLLM, *args: str) -> None:
    assert main([*args, "--model", "scripted", "--base-url", llm.base_url, "-q"]) == 0


def test_self_dc_routes_and_confidence_histogram(tmp_path: Path) -> None:
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in [
        {"id": "winner", "question": Q_WINNER, "answers": ["Gulls"]},
        {"id": "bridge", "question": Q_BRIDGE, "answers": ["Ada Quill"]},
        {"id": "town", "question": Q_TOWN, "answers": ["Brindle"]},
    ]))
    write_jsonl(tmp_path / "events.jsonl", [Event(
        id="ev-1", date=date(2031, 5, 9), source=SOURCE,
        text="Mayor Ada Quill opened the Vela bridge.")])
    with ScriptedLLM(self_dc_model) as llm:
        run(llm, "--data", str(data), "--method", "self-dc", "--alpha", "0.4", "--beta", "0.1",
            "--corpus", str(tmp_path / "events.jsonl"), "--out", str(tmp_path / "sdc"))
    predictions = {p["id"]: p for p in read_lines(tmp_path / "sdc" / "predictions.jsonl")}
    assert predictions["town"]["routes"] == {
        "self-dc:decompose": 1, "self-dc:generate": 1, "self-dc:retrieve": 1}
    assert [(predictions[i]["route"], predictions[i]["confidence"])
            for i in ("winner", "bridge", "town")] == [
        ("self-dc:generate", 0.9), ("self-dc:retrieve", 0.0), ("self-dc:decompose", 0.4)]

    report = tmp_path / "REPORT.md"
    assert main(["report", str(tmp_path / "sdc"), "--out", str(report)]) == 0
    text = report.read_text()
    assert "## Self-DC: routes and confidences (section 6.4)" in text
    # Route, questions, share, Cover-EM and Acc of those questions, decisions at any depth.
    assert "| Self-DC (verb, #k filled) | decompose | 1 | 33.3 | 0.0 | – | 1 |" in text
    assert "| Self-DC (verb, #k filled) | generate | 1 | 33.3 | 100.0 | – | 2 |" in text
    assert "| Self-DC (verb, #k filled) | retrieve | 1 | 33.3 | 100.0 | – | 2 |" in text
    assert ("| Self-DC (verb, #k filled) | 3 | 33.3 | 0.0 | 0.0 | 0.0 | 33.3 | 0.0 | 0.0 | 0.0 | "
            "0.0 | 33.3 | 0.0 |") in text
    assert "| Method | n | 0 | 1-10 | 11-20 |" in text
    assert (tmp_path / "REPORT-confidence.png").read_bytes()[:8] == PNG


FRESH_ROWS = [  # id, question, answer, effective year, hops; the model knows the older facts
    ("0", "Which river runs through the old capital?", "Osk", "before 2022", "one-hop"),
    ("1", "Who chaired the 2022 harbour council?", "Ada Quill", "2022", "multi-hop"),
    ("2", "Which team won the 2023 Harbour Cup?", "Gulls", "2023", "one-hop"),
    ("3", "Who opened the 2024 Vela bridge?", "Ben Marsh", "2024", "one-hop"),
]
KNOWN = {"Which river runs through the old capital?": "the Osk",
         "Who chaired the 2022 harbour council?": "Ada Quill"}


def fresh_model(body: dict[str, Any]) -> Reply:
    question = re.findall(r"Question: (.*)", last_user_message(body))[-1]
    return Reply(KNOWN.get(question, "I do not know"))


@pytest.fixture
def freshqa(tmp_path: Path) -> Path:
    path = tmp_path / "freshqa.csv"
    write_freshqa(path, [freshqa_row(i, "TEST", q, [a], "", effective_year=year, num_hops=hops)
                         for i, q, a, year, hops in FRESH_ROWS])
    write_jsonl(tmp_path / "events.jsonl", [Event(id="ev-1", date=date(2031, 5, 9),
                                                  source=SOURCE, text="A quiet day.")])
    return path


def test_freshqa_statistics_and_accuracy_by_year_and_hops(tmp_path: Path, freshqa: Path) -> None:
    with ScriptedLLM(fresh_model) as llm:
        run(llm, "--data", str(freshqa), "--method", "direct", "--out", str(tmp_path / "d"))
    metrics = json.loads((tmp_path / "d" / "metrics.json").read_text())
    assert {y: g["n"] for y, g in metrics["by_effective_year"].items()} == {
        "before-2022": 1, "2022": 1, "2023": 1, "2024": 1}
    assert {h: g["cover_em"] for h, g in metrics["by_hops"].items()} == {
        "multi-hop": 1.0, "one-hop": pytest.approx(1 / 3)}
    report = tmp_path / "REPORT.md"
    assert main(["report", str(tmp_path / "d"), "--out", str(report)]) == 0
    text = report.read_text()
    assert "## FreshQA: statistics (Table 11)" in text
    assert "| multi-hop | one-hop | before-2022 | 2022 | 2023 | 2024 | total |" in text
    assert "| 1 | 3 | 1 | 1 | 1 | 1 | 4 |" in text
    assert "| Direct | Cover-EM | 100.0 | 100.0 | 0.0 | 0.0 | 100.0 | 33.3 |" in text
    assert (tmp_path / "REPORT-freshqa-years.png").read_bytes()[:8] == PNG


def test_sweep_plots_accuracy_from_zero_beside_retrieval_calls(
    tmp_path: Path, freshqa: Path
) -> None:
    with ScriptedLLM(fresh_model) as llm:
        run(llm, "sweep", "--data", str(freshqa), "--method", "rr", "--param", "top-k",
            "--values", "1", "2", "--corpus", str(tmp_path / "events.jsonl"),
            "--out", str(tmp_path / "sweep"))
    sweep = read_output(tmp_path / "sweep" / SWEEP, SweepFile)
    assert [r.by_effective_year["2022"].cover_em for r in sweep.settings] == [1.0, 1.0]
    accuracy, retrieval = sweep_panels([(tmp_path / "sweep", sweep)])
    # Percent, not fractions, beside the retrieval calls; one line per sweep.
    assert accuracy.ylabel == "Cover-EM (%)" and accuracy.lines[0].ys == [50.0, 50.0]
    assert retrieval.lines[0].ys == [4, 4] and not retrieval.percent
    figure = line_figure("top-k", [accuracy, retrieval])
    assert [axis.get_ylim()[0] for axis in figure.axes] == [0, 0]
    assert figure.axes[0].get_ylim()[1] == 100
    report = tmp_path / "REPORT.md"
    assert main(["report", str(tmp_path / "sweep"), "--out", str(report)]) == 0
    text = report.read_text()
    assert "![top-k sweep](REPORT-top-k.png)" in text
    assert "![top-k sweep by effective year](REPORT-top-k-years.png)" in text
    for name in ("REPORT-top-k.png", "REPORT-top-k-years.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG
