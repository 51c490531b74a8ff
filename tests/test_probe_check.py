"""The build checks its --probe-model before the pool is screened: a model that answers the
closed-book questions about the run's first events after the cutoff knew them, and the run
stops with the figures (or goes on with --allow-late-probe-model); run.json and the card record
the check (issue 40, item 4). Real `cuqa-build` processes against a scripted model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main as build
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.run import load_run_info
from cuqa_builder.testing.cutoff_llm import KnowledgeResponder, dated_events
from cuqa_builder.testing.openai_server import ScriptedLLM
from tests.test_release import card_parts

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OPENAI_API_KEY": "sk-test-probe-check",
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
ENV.pop("OPENAI_BASE_URL", None)
EVENTS = dated_events(["2023-05", "2023-06", "2023-07", "2023-08"], 6)


def generate(run: Path, llm: ScriptedLLM, *extra: str) -> subprocess.CompletedProcess[str]:
    """The generate stage with nothing to compose (--limit 0): the check runs all the same."""
    return subprocess.run(
        [sys.executable, "-m", "cuqa_builder.cli.build", "--out", str(run), "--cutoff",
         "2023-04", "--until", "2023-12-31", "--stage", "generate", "--prompts", "paper",
         "--limit", "0", "-q", "--base-url", llm.base_url, "--model", "writer",
         "--probe-model", "probe", *extra],
        env=ENV, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    write_jsonl(folder / "events.jsonl", EVENTS)
    return folder


def test_a_probe_model_that_knows_the_events_stops_the_run(run: Path) -> None:
    with ScriptedLLM(KnowledgeResponder(EVENTS, known_until="2023-12")) as llm:
        done = generate(run, llm)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("cuqa-build: error: generate failed: probe model check: probe "
                           "answered ")
    assert "closed-book questions about events of 2023-05-01 to 2023-07-31" in last
    assert "its knowledge seems to go past the cutoff 2023-04" in last
    assert "--allow-late-probe-model" in last and "docs/probe-models.md" in last
    check = load_run_info(run).probe_model_check
    assert check is not None and check.outcome == "knows the events"
    assert check.asked == 8 and check.correct >= 4 and check.judge == "normalised match"
    assert not (run / "candidates.jsonl").exists() or not (run / "candidates.jsonl").read_text()


def test_allowed_it_warns_goes_on_and_the_card_says_so(run: Path, tmp_path: Path) -> None:
    with ScriptedLLM(KnowledgeResponder(EVENTS, known_until="2023-12")) as llm:
        done = generate(run, llm, "--allow-late-probe-model")
        calls = llm.calls
        again = generate(run, llm, "--allow-late-probe-model")
        assert llm.calls == calls  # the check's calls come from the run's cache
    assert done.returncode == 0 == again.returncode, done.stderr
    assert "WARNING" in done.stderr and "going on" in done.stderr
    assert ": allowed" in done.stdout.split("  probe model check: ", 1)[1].splitlines()[0]
    check = load_run_info(run).probe_model_check
    assert check is not None and check.outcome == "allowed"
    # the card of a release of this run records it
    from tests.validation_samples import abc
    write_jsonl(run / "cuqa.jsonl", [abc().to_item()])
    assert build(["--out", str(run), "--stage", "release", "--name", "probe-checked",
                  "--output-root", str(tmp_path / "output")]) == 0
    body = card_parts(tmp_path / "output" / "probe-checked")[1]
    assert (f"the probe model probe was asked closed-book about the run's events of 2023-05-01 "
            f"to 2023-07-31 (judge: normalised match): it answered {check.correct} of 8; 50% "
            "or more would mean it knew them. **It did: the build went on with "
            "`--allow-late-probe-model`") in body


def test_a_model_of_the_cutoff_passes(run: Path) -> None:
    with ScriptedLLM(KnowledgeResponder(EVENTS, known_until="2023-04")) as llm:
        done = generate(run, llm)
    assert done.returncode == 0, done.stderr
    line = done.stdout.split("  probe model check: ", 1)[1].splitlines()[0]
    assert line.startswith("probe answered ") and line.endswith(
        "(judge: normalised match; 50% or more: it knew them): passed; 18 events in those "
        "days, 8 picked")


def test_with_batch_files_the_check_says_it_is_skipped(run: Path, tmp_path: Path) -> None:
    with ScriptedLLM(KnowledgeResponder(EVENTS, known_until="2023-12")) as llm:
        done = generate(run, llm, "--batch-files", str(tmp_path / "rounds"))
        assert llm.calls == 0
    assert "probe model check of probe: skipped (not run with --batch-files" in done.stdout
