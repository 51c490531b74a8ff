"""`--estimate`: calls, tokens, cost and time before a run, nothing called or written; checked
against what the scripted model's run then spends."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.build import main as build
from cuqa_builder.cli.evaluate import main as evaluate
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.llm.local_registry import record_speed
from cuqa_builder.llm.prices import PriceTable
from cuqa_builder.llm.types import SpeedSums
from cuqa_builder.records.candidates import GenerationFailure
from cuqa_builder.stages.generate_resume import EVENTS_CHECKED_TOGETHER
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from cuqa_builder.testing.pool_llm import PoolResponder
from tests.test_connected import SAMPLE
from tests.test_troubleshooting import NamesTheBridge

EVENTS = 100


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _generate(out: Path, llm: ScriptedLLM, *extra: str) -> int:
    return build(["--out", str(out), "--cutoff", "2023-04", "--prompts", "paper", "--stage",
                  "generate", "-q",
                  "--base-url", llm.base_url, "--model", "scripted", *extra])


def _totals(text: str) -> tuple[int, int, int]:
    """(calls, tokens in, tokens out) of the estimate's total row."""
    row = re.search(r"^\s+total\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)", text, re.MULTILINE)
    assert row is not None, text
    calls, tokens_in, tokens_out = (int(g.replace(",", "")) for g in row.groups())
    return calls, tokens_in, tokens_out


def _questions(folder: Path, count: int) -> Path:
    data = folder / "q.jsonl"
    data.write_text("".join(json.dumps({"question": f"Who led council {i}?", "answers": ["Ana"]})
                            + "\n" for i in range(count)))
    return data


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_estimate_calls_nothing_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(tmp_path / "events.jsonl", make_events(10))
    before = _files(tmp_path)
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert _generate(tmp_path, llm, "--estimate", "--hard", "2") == 0
        assert build(["--out", str(tmp_path), "--cutoff", "2023-04", "--prompts", "paper",
                      "--stage", "all",
                      "--source", str(tmp_path), "--base-url", llm.base_url, "--model",
                      "gpt-4o-mini", "--probe-model", "gpt-4o", "--estimate"]) == 0
    assert llm.calls == 0 and _files(tmp_path) == before
    text = capsys.readouterr().out
    assert "nothing was called or written" in text
    assert "UnknownQuestionGen" in text and "MergeQuestions (hard)" in text
    assert _totals(text)[0] == 4 * 10 + 2
    assert "through the Batch API" in text and "probe: closed book" in text
    assert "in batch mode 4 round(s)" in text


def test_a_pilot_run_calibrates_the_estimate_within_15_percent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(tmp_path / "events.jsonl", make_events(EVENTS))
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert _generate(tmp_path, llm, "--limit", "20") == 0  # the pilot
        capsys.readouterr()
        assert _generate(tmp_path, llm, "--estimate") == 0
        estimate = capsys.readouterr().out
        assert _generate(tmp_path, llm) == 0
        summary = capsys.readouterr().out
    assert "calibrated on 80 cached calls" in estimate
    calls, tokens_in, tokens_out = _totals(estimate)
    spent = re.search(r"(\d+) calls, \d+ cache hits, (\d+) tokens in, (\d+) out", summary)
    assert spent is not None
    spent_calls, spent_in, spent_out = map(int, spent.groups())
    assert calls == spent_calls == 4 * (EVENTS - 20)
    assert abs(tokens_in - spent_in) / spent_in < 0.15
    assert abs(tokens_out - spent_out) / spent_out < 0.15
    assert f"estimate {calls} calls, {tokens_in} tokens in, {tokens_out} out" in summary


def test_eval_estimate_dry_runs_the_method(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _questions(tmp_path, 6)
    out = tmp_path / "eval"
    assert evaluate(["--data", str(data), "--method", "self-dc", "--out", str(out),
                     "--model", "gpt-4o-mini", "--judge-model", "gpt-4o-mini",
                     "--estimate"]) == 0
    text = capsys.readouterr().out
    assert not out.exists()
    # Confidence, then (no confidence read) retrieve-then-read, then the judge: 3 per item.
    assert "solver_self_dc_confidence" in text and "judge" in text
    assert _totals(text)[0] == 3 * 6
    assert "in batch mode 3 round(s)" in text


def test_batch_prices_are_half_the_live_ones_unless_given() -> None:
    table = PriceTable.load()
    assert table.cost("gpt-4o-mini", 1_000_000, 1_000_000, batch=True) == pytest.approx(
        table.cost("gpt-4o-mini", 1_000_000, 1_000_000) / 2)


def test_a_price_file_may_set_batch_prices(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"house-model": {"input": 1.0, "output": 2.0,
                                                  "batch_input": 0.8, "batch_output": 1.0}}))
    table = PriceTable.load(prices)
    assert table.cost("house-model", 1_000_000, 1_000_000, batch=True) == pytest.approx(1.8)


@pytest.mark.parametrize(("price", "problem"), [
    ('{"input": -0.15, "output": 0.6}', "scripted.input: Input should be greater than or equal"),
    ('{"input": NaN, "output": 0.6}', "scripted.input: Input should be a finite number"),
    ('{"input": 0.15, "output": Infinity}', "scripted.output: Input should be a finite number"),
    ('{"input": 0.15, "output": 0.6, "batch_output": -1}', "scripted.batch_output: Input should"),
])
@pytest.mark.parametrize("estimate", [False, True], ids=["run", "estimate"])
def test_a_price_that_is_negative_or_not_finite_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], price: str, problem: str, estimate: bool
) -> None:
    write_jsonl(tmp_path / "events.jsonl", make_events(3))
    prices = tmp_path / "prices.json"
    prices.write_text('{"scripted": ' + price + "}", encoding="utf-8")
    with ScriptedLLM(AlgorithmResponder()) as llm:
        status = _generate(tmp_path, llm, "--prices", str(prices),
                           *(["--estimate"] if estimate else []))
        assert llm.calls == 0
    err = capsys.readouterr().err
    assert status == 1, err
    assert f"{prices} is not a price table" in err and problem in err
    assert "Traceback" not in err and "$-" not in err and "nan" not in err.lower()


def test_the_estimate_counts_the_requests_of_looking_articles_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25: each article costs its revision and MediaWiki's rendering of it; a run built
    from a snapshot reads its articles there."""
    write_jsonl(tmp_path / "events.jsonl", make_events(3))
    args = ["--out", str(tmp_path), "--cutoff", "2023-04", "--model", "m", "--estimate"]
    assert build([*args, "--stage", "ground", "--wiki-api", "http://127.0.0.1:9/w/api.php"]) == 0
    assert ("articles: 2 MediaWiki API requests per entity article not looked up yet (its "
            "revision at the end of the cutoff, then MediaWiki's rendering of it)") in \
        capsys.readouterr().out
    assert build([*args, "--stage", "generate", "--source", str(tmp_path)]) == 0
    assert f"articles: read from {tmp_path / 'articles'}, no MediaWiki request" in \
        capsys.readouterr().out


class AnswersBadlyFirst(PoolResponder):
    """The first reply to each event's descriptions has no "B1: ..." line (refused): each is
    asked twice."""

    def __init__(self) -> None:
        super().__init__()
        self.first_seed: dict[str, int] = {}

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        asked = prompt.split("\n\nYour previous reply was refused", 1)[0]
        if "write a description" in prompt and self.first_seed.setdefault(
                asked, body["seed"]) == body["seed"]:
            return Reply(text="Here are the descriptions you asked for.")
        return super().__call__(body)


def test_the_estimate_counts_the_repairs_a_pilot_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a pilot, the estimate for the other events plans each step as often as the pilot
    asked it (two description requests an event): within 25 % of the calls the run then makes
    (one an event was planned before). Not planned: the pilot's last group of events checked
    together fills up in the run, and its checks are asked again with the new events'."""
    def connected(*extra: str) -> int:
        return build(["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE),
                      "--out", str(tmp_path), "--stage", "generate", "-q", "--base-url",
                      llm.base_url, "--model", "scripted", *extra])

    with ScriptedLLM(AnswersBadlyFirst()) as llm:
        assert connected("--stage", "events") == 0
        assert connected("--limit", str(EVENTS_CHECKED_TOGETHER)) == 0  # the pilot
        capsys.readouterr()
        assert connected("--estimate") == 0
        estimate = capsys.readouterr().out
        calls = llm.calls
        assert connected() == 0
        spent = llm.calls - calls
    pilot = re.search(r"as many times per event as the run's (\d+) events took", estimate)
    assert pilot is not None and int(pilot[1]) >= 5
    described = re.search(r"^\s+DescribeBridges\s+([\d,]+)", estimate, re.MULTILINE)
    assert described is not None and int(described[1]) % 2 == 0 and int(described[1]) > 0
    assert abs(_totals(estimate)[0] - spent) <= 0.25 * spent, (estimate, spent)



def _measured_local_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          seconds_per_output_token: float) -> str:
    """The small embedded model, with five timed calls recorded (0.01 s a prompt token)."""
    monkeypatch.setenv("CUQA_MODELS_DIR", str(tmp_path / "models"))
    model = "smollm2-135m-instruct-q4_1"
    measured = SpeedSums()
    for prompt, output in ((300, 10), (70, 3), (900, 40), (250, 120), (600, 8)):
        measured.add(prompt, output, 0.01 * prompt + seconds_per_output_token * output)
    record_speed(model, measured)
    return model

def test_a_speed_fit_recovers_the_seconds_per_token() -> None:
    sums = SpeedSums()
    for prompt, output in ((300, 10), (70, 3), (120, 6), (900, 40), (250, 120)):
        sums.add(prompt, output, 0.01 * prompt + 0.4 * output)
    speed = sums.fit()
    assert speed is not None and speed.calls == 5
    assert speed.per_prompt_token == pytest.approx(0.01)
    assert speed.per_output_token == pytest.approx(0.4)
    only_output = SpeedSums()
    for output in (5, 10, 20):  # times that fall as prompts grow: no prompt rate below 0
        only_output.add(1000 - 40 * output, output, 0.5 * output)
    fitted = only_output.fit()
    assert fitted is not None and fitted.per_prompt_token >= 0 and fitted.per_output_token > 0


def test_the_embedded_model_s_time_comes_from_its_speed_on_this_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`cuqa-eval --estimate` on the embedded model, before its run's cache knows it: the time
    is the calls' tokens at the speed its earlier runs measured here (prompt tokens count: a
    call of 1,000 prompt tokens is 10 s at 100 tokens/s), not a flat default."""
    model = _measured_local_model(tmp_path, monkeypatch, 0.4)
    data = _questions(tmp_path, 6)
    assert evaluate(["--data", str(data), "--method", "direct", "--out", str(tmp_path / "e"),
                     "--llm", f"local:{model}", "--concurrency", "1", "--estimate"]) == 0
    text = capsys.readouterr().out
    assert "its time from 5 timed calls (100 prompt and 2.5 output tokens/s a call)" in text
    _, tokens_in, tokens_out = _totals(text)
    shown = re.search(r"time: about (\d+) s live \(bound by concurrency 1\)", text)
    assert shown is not None
    assert int(shown[1]) == pytest.approx(0.01 * tokens_in + 0.4 * tokens_out, abs=1)


def _connected(out: Path, llm: ScriptedLLM, *extra: str) -> int:
    return build(["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE),
                  "--out", str(out), "--limit", "8", "-q", "--base-url", llm.base_url,
                  "--model", "scripted", *extra])


def _cached_in(estimate: str) -> list[int]:
    """Each model line's "all N calls are in the cache"."""
    return [int(n.replace(",", "")) for n in
            re.findall(r": 0 calls, 0 min: all ([\d,]+) calls are in the cache", estimate)]


def test_on_a_finished_run_the_estimate_is_what_a_rerun_pays_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32: a finished run's estimate planned the checker again ("about 8 min") and the
    candidates of the failed events ("5 not generated yet"), where a re-run pays 0 calls. Its
    events that failed (an event's first named thing is described by its name) are made again
    from the cache, and its checks were asked while composing: 0 calls, 0 min, and the cached
    calls the re-run reads."""
    with ScriptedLLM(NamesTheBridge()) as llm:
        assert _connected(tmp_path, llm) == 0
        failed = read_jsonl(tmp_path / "generation-failures.jsonl", GenerationFailure)
        capsys.readouterr()
        assert _connected(tmp_path, llm, "--estimate") == 0
        estimate = capsys.readouterr().out
        calls = llm.calls
        assert _connected(tmp_path, llm) == 0
        rerun = capsys.readouterr().out
        assert llm.calls == calls  # the re-run paid nothing
    assert "total" not in estimate and "round(s)" not in estimate
    generate_hits = re.search(r"LLM scripted: 0 calls, (\d+) cache hits", rerun)
    checker_hits = re.search(r"checker: .*; 0 calls, (\d+) from the cache", rerun)
    assert generate_hits is not None and checker_hits is not None, rerun
    # the failed events' calls; the re-run also reads those of the events checked together
    # with them (their requests are dealt across the group), at no cost either
    [cached] = _cached_in(estimate)
    assert 0 < cached <= int(generate_hits[1]), estimate
    # the checks were asked while composing: validate reads them from the candidates
    assert int(checker_hits[1]) == 0 and "nothing to ask" not in estimate
    assert estimate.count("model scripted") == 1  # one line for the model, not one a stage
    assert {f.step for f in failed} >= {"Pool"}  # events whose pool gave no candidate
    assert f"the {len(failed)} items that failed last time, every call answered, are made " \
        "again from the cache and fail alike" in estimate

def test_on_a_new_run_the_estimate_counts_what_the_run_asks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32: on a new run the estimate said "0 calls ... 1 round(s)". From a snapshot it
    finds the events as the events stage would (writing nothing) and plans their calls; without
    pages it says what it cannot know."""
    with ScriptedLLM(PoolResponder()) as llm:
        assert _connected(tmp_path / "run", llm, "--estimate") == 0
        estimate = capsys.readouterr().out
        assert llm.calls == 0 and not (tmp_path / "run").exists()
        assert _connected(tmp_path / "run", llm) == 0
        paid = llm.calls
        capsys.readouterr()
        assert build(["--cutoff", "2023-04", "--out", str(tmp_path / "fetched"), "--model", "m",
                      "--estimate"]) == 0
        unfetched = capsys.readouterr().out
    assert f"events: 33 in the window from {SAMPLE}" in estimate
    assert paid > 0 and abs(_totals(estimate)[0] - paid) <= 0.15 * paid, (estimate, paid)
    assert "generate and validate: the window's pages are not fetched yet" in unfetched
    assert "calls" not in unfetched.split("not fetched yet", 1)[0] and "round(s)" not in unfetched


def test_a_finished_evaluation_s_estimate_reads_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _questions(tmp_path, 4)
    with ScriptedLLM(lambda body: Reply(text="Ana")) as llm:
        args = ["--data", str(data), "--method", "direct", "--out", str(tmp_path / "e"),
                "--model", "scripted", "--base-url", llm.base_url, "-q"]
        assert evaluate(args) == 0
        calls = llm.calls
        capsys.readouterr()
        assert evaluate([*args, "--estimate"]) == 0
        assert _cached_in(capsys.readouterr().out) == [calls] == [4]


def test_the_quick_start_s_estimate_names_its_model_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The embedded model composes from structure (no call) and then checks: one table for
    it, not a line "0 calls, 0 min: nothing to ask" beside it, and no "0 output tokens/s" for
    a model slower than one token a second (issue 40, item 6)."""
    model = _measured_local_model(tmp_path, monkeypatch, 1.6)
    assert build(["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE),
                  "--out", str(tmp_path / "run"), "--llm", f"local:{model}",
                  "--estimate"]) == 0
    text = capsys.readouterr().out
    assert text.count(f"model {model}") == 1 and "nothing to ask" not in text
    assert "(100 prompt and 0.62 output tokens/s a call)" in text
    assert "note: generate: " in text  # the composing stage's notes stay, under the one table
