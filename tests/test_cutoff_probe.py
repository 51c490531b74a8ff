"""`cuqa-eval cutoff`: a scripted model that knows the events up to June 2023 is found to end
there; `cuqa-build --cutoff auto:MODEL` then uses the estimate. The estimation rule and the
Wilson interval on figures worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main as build_main
from cuqa_builder.cli.evaluate import main as eval_main
from cuqa_builder.cutoff_estimate import (
    CutoffProbeResult,
    estimate_cutoff,
    month_accuracy,
    wilson_interval,
)
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.events import Event
from cuqa_builder.records.items import SubQuestion
from cuqa_builder.run import load_run_info
from cuqa_builder.testing.cutoff_llm import KnowledgeResponder, dated_events
from cuqa_builder.testing.openai_server import ScriptedLLM
from tests.validation_samples import aab

MONTHS = [f"2023-{m:02d}" for m in range(1, 11)]
KNOWN_UNTIL = "2023-06"
PER_MONTH = 12
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "wiki"


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run's events (20 a month) and candidates for the first five events of each month."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cutoff")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("CUQA_CUTOFFS_DIR", str(tmp_path / "cutoffs"))
    out = tmp_path / "run"
    events = dated_events(MONTHS, 20)
    write_jsonl(out / "events.jsonl", events)
    candidates = []
    for n, event in enumerate(e for e in events if e.date.day <= 5):
        code = event.text.split("accord ")[1].split(" ")[0]
        unknown = SubQuestion(question=f"Which group signed accord {code}?",
                              answer=event.entities[0].text, kind="unknown")
        known = SubQuestion(question="Which body is this?", answer="x", kind="known")
        ref = aab().event.model_copy(update={"id": event.id, "date": event.date,
                                             "text": event.text})
        candidates.append(aab(id=f"cq-{n:016d}", event=ref, sub_questions=[unknown, known],
                              intermediates=None))
    write_jsonl(out / "candidates.jsonl", candidates)
    return out


def probe(run: Path, llm: ScriptedLLM, out: Path, *extra: str) -> int:
    return eval_main(["cutoff", "--events", str(run / "events.jsonl"), "--out", str(out),
                      "--per-month", str(PER_MONTH), "--base-url", llm.base_url,
                      "--model", "scripted", "-q", *extra])


def test_the_probe_finds_the_month_the_scripted_model_knows_up_to(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = read_jsonl(run / "events.jsonl", Event)
    with ScriptedLLM(KnowledgeResponder(events, KNOWN_UNTIL)) as llm:
        assert probe(run, llm, tmp_path / "probe") == 0
        first_calls = llm.calls
        assert probe(run, llm, tmp_path / "probe") == 0  # the re-run is served by the cache
        assert llm.calls == first_calls
    result = CutoffProbeResult.model_validate_json((tmp_path / "probe" / "cutoff.json").read_text())
    assert result.estimate.cutoff == KNOWN_UNTIL
    assert result.estimate.known.first == "2023-01" and result.estimate.known.last == "2023-06"
    assert result.estimate.unseen.first == "2023-07"
    assert [m.month for m in result.months] == MONTHS
    assert all(m.asked == PER_MONTH for m in result.months)
    generated_prompts = [body for body in llm.requests
                         if "According to the unknown event" in body["messages"][-1]["content"]]
    # Questions come from the candidates where the sample holds their event, else Table 5.
    assert result.events_sampled == 10 * PER_MONTH and result.unusable == result.failed == 0
    assert result.questions_from_candidates + result.questions_generated == 10 * PER_MONTH
    assert 0 < result.questions_from_candidates < 10 * PER_MONTH
    assert len(generated_prompts) == result.questions_generated
    assert first_calls == result.questions_generated + 10 * PER_MONTH
    questions = [json.loads(line) for line in (tmp_path / "probe" / "questions.jsonl").open()]
    assert len(questions) == 10 * PER_MONTH
    assert {q["source"] for q in questions} == {"candidate", "generated"}
    assert (tmp_path / "probe" / "cutoff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = capsys.readouterr().out
    assert "estimated cutoff: 2023-06" in summary
    assert "cuqa-build --cutoff auto:scripted" in summary

    # cuqa-build takes the estimate, and records the probe's figures in run.json.
    out = tmp_path / "build"
    assert build_main(["--cutoff", "auto:scripted", "--until", "2023-12-31", "--source",
                       str(FIXTURES), "--stage", "events", "--out", str(out), "-q"]) == 0
    info = load_run_info(out)
    assert info.cutoff == KNOWN_UNTIL
    assert [probe.model for probe in info.cutoff_probes] == ["scripted"]
    assert info.cutoff_probes[0].months == result.months
    # A probe's directory names the result too.
    other = tmp_path / "build2"
    assert build_main(["--cutoff", f"auto:{tmp_path / 'probe'}", "--until", "2023-12-31",
                       "--source", str(FIXTURES), "--stage", "events", "--out", str(other),
                       "-q"]) == 0
    assert load_run_info(other).cutoff == KNOWN_UNTIL


def test_a_model_that_knows_nothing_has_no_cutoff_and_auto_refuses(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = read_jsonl(run / "events.jsonl", Event)
    with ScriptedLLM(KnowledgeResponder(events, "2000-01")) as llm:
        assert probe(run, llm, tmp_path / "probe") == 0
    assert "no cutoff found in the window" in capsys.readouterr().out
    code = build_main(["--cutoff", "auto:scripted", "--source", str(FIXTURES), "--stage",
                       "events", "--out", str(tmp_path / "b"), "-q"])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("cuqa-build: error: the cutoff probe of scripted found no cutoff (")
    assert err.rstrip().endswith("give --cutoff YYYY-MM")
    assert build_main(["--cutoff", "auto:nobody", "--source", str(FIXTURES), "--stage",
                       "events", "--out", str(tmp_path / "b"), "-q"]) == 1
    assert "no cutoff probe result for 'nobody'" in capsys.readouterr().err


def test_wilson_intervals_match_worked_examples() -> None:
    low, high = wilson_interval(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    low, high = wilson_interval(0, 10)
    assert (low, round(high, 4)) == (0.0, 0.2775)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def months(*counts: tuple[int, int]) -> list:
    return [month_accuracy(f"2023-{i + 1:02d}", asked, correct)
            for i, (asked, correct) in enumerate(counts)]


def test_the_estimate_is_the_last_month_before_a_clear_drop() -> None:
    found = estimate_cutoff(months((20, 17), (20, 16), (20, 18), (20, 2), (20, 1), (20, 0)))
    assert found.cutoff == "2023-03"
    assert (found.known.correct, found.known.asked, found.unseen.correct) == (51, 60, 3)
    assert "85% over 2023-01..2023-03 and 5% over 2023-04..2023-06" in found.reason


def test_no_estimate_without_a_clear_drop() -> None:
    flat = estimate_cutoff(months((20, 10), (20, 10), (20, 10)))
    assert flat.cutoff is None and "never drops" in flat.reason
    small = estimate_cutoff(months((20, 11), (20, 10), (20, 9), (20, 9)))
    assert small.cutoff is None and "less than the margin of 10%" in small.reason
    noisy = estimate_cutoff(months((4, 2), (4, 1)), margin=0.1)
    assert noisy.cutoff is None and "95% intervals' overlap" in noisy.reason
    assert estimate_cutoff(months((20, 18))).cutoff is None  # one month: nothing to compare
    rising = estimate_cutoff(months((20, 1), (20, 2), (20, 18)))
    assert rising.cutoff is None and "never drops" in rising.reason


@pytest.mark.localmodel
def test_the_probe_runs_end_to_end_on_the_embedded_small_model(
    small_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SmolLM2-135M writes the questions (Table 5) and answers them; with 135M parameters and
    fictional accords it knows none of them, so the honest outcome is "no cutoff found"."""
    monkeypatch.setenv("CUQA_MODELS_DIR", str(small_model))
    monkeypatch.setenv("CUQA_CUTOFFS_DIR", str(tmp_path / "cutoffs"))
    events = tmp_path / "events.jsonl"
    write_jsonl(events, dated_events(["2023-03", "2023-06", "2023-09"], 3))
    args = ["cutoff", "--events", str(events), "--out", str(tmp_path / "probe"), "--per-month",
            "3", "--llm", "local:smollm2-135m-instruct-q4_1", "--concurrency", "2", "-q"]
    assert eval_main(args) == 0
    result = CutoffProbeResult.model_validate_json((tmp_path / "probe" / "cutoff.json").read_text())
    assert result.model == "smollm2-135m-instruct-q4_1" and result.events_sampled == 9
    assert result.questions_generated + result.unusable + result.failed == 9
    assert sum(m.asked for m in result.months) == result.questions_generated
    assert (tmp_path / "probe" / "cutoff.png").stat().st_size > 0
    assert (tmp_path / "cutoffs" / "smollm2-135m-instruct-q4_1.json").is_file()
    assert "cutoff probe of smollm2-135m-instruct-q4_1" in capsys.readouterr().out
    assert result.estimate.cutoff is None, result.estimate.reason
