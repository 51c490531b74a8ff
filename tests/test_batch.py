"""Batch mode: the Batch API (against a loopback stand-in of the Files and Batches endpoints,
through the real `openai` client) and batch files for an offline engine."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.llm.cache import CacheSummary, CallCache
from cuqa_builder.llm.cache_batches import FailedLine
from cuqa_builder.records.candidates import Candidate, GenerationFailure
from cuqa_builder.run import GENERATION_FAILURES
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.batch_server import ScriptedBatches, answer_batch_file
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from tests.documentation import docs_page

REPO = Path(__file__).resolve().parents[1]
EVENTS = 12
PAUSED = 75


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _args(out: Path, base_url: str, *extra: str) -> list[str]:
    return ["--out", str(out), "--cutoff", "2023-04", "--prompts", "paper", "--stage", "generate",
            "-q",
            "--base-url", base_url, "--model", "scripted", "--concurrency", "4", *extra]


def _batch_args(out: Path, server: ScriptedBatches, *extra: str) -> list[str]:
    return _args(out, server.base_url, "--batch", "--batch-poll", "0.01", *extra)


def _candidates(out: Path) -> dict[str, dict[str, Any]]:
    return {c.id: c.model_dump(mode="json") for c in read_jsonl(out / "candidates.jsonl",
                                                                 Candidate)}


def _cache_summary(out: Path) -> CacheSummary:
    cache = CallCache(out / "llm-cache.sqlite")
    try:
        return cache.summary()
    finally:
        cache.close()


def _cached_calls(out: Path) -> int:
    return _cache_summary(out).calls


@pytest.fixture(scope="module")
def live_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], int]:
    """The candidates of a live run on the scripted model, and the calls it paid for."""
    out = tmp_path_factory.mktemp("live")
    write_jsonl(out / "events.jsonl", make_events(EVENTS))
    os.environ.setdefault("OPENAI_API_KEY", "sk-test-dummy")
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert main(_args(out, llm.base_url, "--hard", "2")) == 0
        return _candidates(out), llm.calls


def _fresh(tmp_path: Path, name: str = "run") -> Path:
    out = tmp_path / name
    write_jsonl(out / "events.jsonl", make_events(EVENTS))
    return out


def test_batch_run_gives_the_live_candidates_paying_once_per_request(
    tmp_path: Path, live_run: tuple[dict[str, Any], int], capsys: pytest.CaptureFixture[str],
) -> None:
    live, live_calls = live_run
    out = _fresh(tmp_path)
    with ScriptedBatches(AlgorithmResponder()) as server:
        assert main(_batch_args(out, server, "--hard", "2")) == 0
    assert _candidates(out) == live
    assert server.calls == 0  # nothing went to the live endpoint
    uploaded = server.uploaded_ids()
    assert len(uploaded) == len(set(uploaded)) == server.lines_answered == live_calls
    assert _cached_calls(out) == live_calls
    creates = server.log.count("POST /v1/batches")
    # Algorithm 1's steps: unknown question + passage, known question, merge; then hard merges.
    assert creates == 4
    summary = capsys.readouterr().out
    assert f"{live_calls} calls, 0 cache hits" in summary
    assert "4 rounds, 4 batch files" in summary


def test_rounds_are_split_at_the_request_and_byte_limits(
    tmp_path: Path, live_run: tuple[dict[str, Any], int], capsys: pytest.CaptureFixture[str],
) -> None:
    live, _ = live_run
    out = _fresh(tmp_path)
    with ScriptedBatches(AlgorithmResponder()) as server:
        assert main(_batch_args(out, server, "--hard", "2", "--batch-max-requests", "8",
                                "--batch-max-mb", "0.003")) == 0
    inputs = [data for name, data in server.files.values() if name != "output"]
    assert max(len(d.splitlines()) for d in inputs) <= 8
    assert max(len(d) for d in inputs) <= 3000
    # Lines are 300-560 bytes: the byte limit cuts some files before their 8th line.
    assert any(len(d.splitlines()) < 8 and len(d) > 2400 for d in inputs)
    assert _candidates(out) == live
    rounds = int(capsys.readouterr().out.split(" rounds, ")[0].rsplit("; ", 1)[1])
    assert len(inputs) > rounds


class FailOnce:
    """Answer like the scripted model, but the first request holding `marker` gets `reply`."""

    def __init__(self, marker: str, reply: Reply) -> None:
        self.inner = AlgorithmResponder()
        self.marker = marker
        self.reply = reply
        self.failed = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        if self.marker in last_user_message(body) and not self.failed:
            self.failed += 1
            return self.reply
        return self.inner(body)


def test_a_failed_line_is_asked_again_in_the_next_round(
    tmp_path: Path, live_run: tuple[dict[str, Any], int], capsys: pytest.CaptureFixture[str],
) -> None:
    live, live_calls = live_run
    out = _fresh(tmp_path)
    flaky = FailOnce("Generate a detailed passage", Reply(status=500, text="overloaded"))
    with ScriptedBatches(flaky) as server:
        assert main(_batch_args(out, server, "--hard", "2")) == 0
    assert flaky.failed == 1 and _candidates(out) == live
    uploaded = server.uploaded_ids()
    assert len(uploaded) == live_calls + 1 and len(set(uploaded)) == live_calls
    assert server.calls == 0  # retried in a round, never live
    assert "1 failed lines (1 asked again in the next round)" in capsys.readouterr().out


def test_a_refused_line_fails_its_item_at_once(tmp_path: Path) -> None:
    out = _fresh(tmp_path)
    refusing = FailOnce("Generate a detailed passage", Reply(status=400, text="bad request"))
    with ScriptedBatches(refusing) as server:
        assert main(_batch_args(out, server)) == 0
        failures = read_jsonl(out / GENERATION_FAILURES, GenerationFailure)
        assert len(failures) == 1 and "HTTP 400" in failures[0].reason
        assert len(_candidates(out)) == EVENTS - 1
        uploaded = server.uploaded_ids()
        assert len(uploaded) == len(set(uploaded))
        # Asked again, it would be refused again: the next command fails it at once.
        assert main(_batch_args(out, server)) == 0
        assert server.uploaded_ids() == uploaded
    assert read_jsonl(out / GENERATION_FAILURES, GenerationFailure) == failures


def test_a_cache_made_before_failures_kept_their_error_is_brought_up_to_date(
    tmp_path: Path
) -> None:
    path = tmp_path / "llm-cache.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE batch_failures (key TEXT PRIMARY KEY, rounds INTEGER NOT NULL)")
        db.execute("INSERT INTO batch_failures VALUES ('k', 2)")
    db.close()
    cache = CallCache(path)
    try:
        assert cache.batch_failure("k") == (2, None)
        cache.batch_failed([FailedLine("k")])
        cache.batch_failed_for_good({"k": "m: batch call failed after 3 rounds"})
        assert cache.batch_failure("k") == (3, "m: batch call failed after 3 rounds")
    finally:
        cache.close()


def test_an_expired_batch_resubmits_only_what_it_did_not_answer(
    tmp_path: Path, live_run: tuple[dict[str, Any], int],
) -> None:
    live, live_calls = live_run
    out = _fresh(tmp_path)
    with ScriptedBatches(AlgorithmResponder()) as server:
        server.plan.expire_after = 7  # the first batch answers 7 of its 24 lines, then expires
        first = server._create  # only the first batch expires

        def create_then_plain(body: dict[str, Any]) -> dict[str, Any]:
            created = first(body)
            server.plan.expire_after = None
            return created

        server._create = create_then_plain  # type: ignore[method-assign]
        assert main(_batch_args(out, server, "--hard", "2")) == 0
    statuses = [b.status for b in server.batches.values()]
    assert statuses[0] == "expired" and set(statuses[1:]) == {"completed"}
    uploaded = server.uploaded_ids()
    assert len(uploaded) == live_calls + 2 * EVENTS - 7  # the 17 unanswered, once more
    assert server.lines_answered == live_calls and _candidates(out) == live


def test_a_batch_that_fails_validation_fails_its_items(tmp_path: Path) -> None:
    out = _fresh(tmp_path)
    with ScriptedBatches(AlgorithmResponder()) as server:
        server.plan.fail_validation = "the model does not exist"
        assert main(_batch_args(out, server)) == 1  # no candidate could be made
    failures = read_jsonl(out / GENERATION_FAILURES, GenerationFailure)
    assert len(failures) == EVENTS
    assert all("batch_1 failed" in f.reason and "does not exist" in f.reason for f in failures)
    assert server.lines_answered == 0


def _killed_when(out: Path, server: ScriptedBatches, ready: Callable[[], bool]) -> None:
    """Start a batch run of cuqa-build in a process and SIGKILL it once `ready()`."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    env.update(OPENAI_API_KEY="sk-test-dummy", PYTHONPATH=str(REPO))
    process = subprocess.Popen(
        [sys.executable, "-m", "cuqa_builder.cli.build",
         *_batch_args(out, server, "--hard", "2")],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)


def _paid_once(server: ScriptedBatches, live_calls: int) -> None:
    """Each request uploaded once, each input file in one batch, each line answered once."""
    uploaded = server.uploaded_ids()
    assert len(uploaded) == len(set(uploaded)) == server.lines_answered == live_calls
    inputs = [batch.input_file_id for batch in server.batches.values()]
    assert len(inputs) == len(set(inputs))


def test_a_killed_process_picks_up_its_running_batch_without_paying_again(
    tmp_path: Path, live_run: tuple[dict[str, Any], int],
) -> None:
    live, live_calls = live_run
    out = _fresh(tmp_path)
    with ScriptedBatches(AlgorithmResponder()) as server:
        server.hold()
        # Two looks at the batch: it is in_progress and the client is polling it.
        _killed_when(out, server,
                     lambda: sum(e.startswith("GET /v1/batches/") for e in server.log) >= 2)
        assert server.batches["batch_1"].status == "in_progress"
        log_before = len(server.log)
        server.release()
        assert main(_batch_args(out, server, "--hard", "2")) == 0
    resumed = server.log[log_before:]
    assert resumed[0] == "GET /v1/batches/batch_1"  # the running batch, before any upload
    _paid_once(server, live_calls)
    assert _candidates(out) == live


def test_a_process_killed_while_its_batch_was_made_finds_that_batch(
    tmp_path: Path, live_run: tuple[dict[str, Any], int],
) -> None:
    """Killed after the provider made the batch but before the client heard its id: the next
    run finds the batch by its input file instead of making a second one."""
    live, live_calls = live_run
    out = _fresh(tmp_path)
    with ScriptedBatches(AlgorithmResponder()) as server:
        server.hold_creates()
        _killed_when(out, server, lambda: "batch_1" in server.batches)
        log_before = len(server.log)
        server.release()
        assert main(_batch_args(out, server, "--hard", "2")) == 0
    resumed = server.log[log_before:]
    assert resumed[:3] == ["GET /v1/files/file-1", "GET /v1/batches?limit=100",
                           "GET /v1/batches/batch_1"]
    _paid_once(server, live_calls)
    assert _candidates(out) == live


def test_a_batch_made_by_a_create_that_timed_out_is_not_made_again(
    tmp_path: Path, live_run: tuple[dict[str, Any], int],
) -> None:
    live, live_calls = live_run
    out = _fresh(tmp_path)
    with ScriptedBatches(AlgorithmResponder()) as server:
        server.hold_creates()  # every create is made but answered too late: the client gives up
        try:
            assert main(_batch_args(out, server, "--hard", "2", "--timeout", "0.5")) == 0
        finally:
            server.release()
    assert server.log.count("GET /v1/batches?limit=100") == len(server.batches) > 1
    _paid_once(server, live_calls)
    assert _candidates(out) == live


# --- batch files for an offline engine ------------------------------------------------------


def _files_args(out: Path, directory: Path, *extra: str) -> list[str]:
    return ["--out", str(out), "--cutoff", "2023-04", "--prompts", "paper", "--stage", "generate",
            "-q",
            "--model", "Qwen/Qwen2.5-7B-Instruct", "--batch-files", str(directory), *extra]


def test_batch_file_rounds_stop_and_go_on_with_each_output_file(
    tmp_path: Path, live_run: tuple[dict[str, Any], int], capsys: pytest.CaptureFixture[str],
) -> None:
    live, live_calls = live_run
    out, rounds = _fresh(tmp_path), tmp_path / "rounds"
    engine = AlgorithmResponder()
    for number in range(1, 10):
        status = main(_files_args(out, rounds, "--hard", "2"))
        if status == 0:
            break
        assert status == PAUSED
        message = capsys.readouterr().err
        source = rounds / f"round-{number:03d}.input.jsonl"
        target = rounds / f"round-{number:03d}.output.jsonl"
        assert (f"python -m vllm.entrypoints.openai.run_batch -i {source} -o {target} "
                "--model Qwen/Qwen2.5-7B-Instruct") in message
        assert main(_files_args(out, rounds, "--hard", "2")) == PAUSED  # no output yet
        assert not (rounds / f"round-{number + 1:03d}.input.jsonl").exists()
        capsys.readouterr()
        lines = source.read_text().splitlines()
        assert all(json.loads(line)["body"]["model"] == "Qwen/Qwen2.5-7B-Instruct"
                   for line in lines)
        target.write_text("\n".join(answer_batch_file(lines, engine)) + "\n")
    assert status == 0 and number == 5
    # The scripted model counts words as tokens: the same answers, so the same candidates
    # except for the model's name.
    renamed = {k: json.loads(json.dumps(v).replace("Qwen/Qwen2.5-7B-Instruct", "scripted"))
               for k, v in _candidates(out).items()}
    assert renamed == live
    assert _cached_calls(out) == live_calls
    # The last command made the last round's part only; its summary speaks of the whole stage.
    last = capsys.readouterr().out.splitlines()
    cached = _cache_summary(out)
    tokens = cached.prompt_tokens + cached.completion_tokens
    assert (f"  the stage as a whole: {len(live)} candidates (AAB 4, ABC 8, hard 2), 0 failed; "
            f"{live_calls} calls, {tokens} tokens; 0 outputs refused by their step check; "
            f"4 batch files read ({live_calls} requests; {live_calls} answered, 0 failed)"
            ) in last, "\n".join(last)


def test_the_last_batch_file_run_sums_up_the_whole_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20: the command that read the last round printed a summary of its own part only
    ("1 new candidates ... 1 rounds, 0 batch files"); every round is counted from the records
    and the cache, refused attempts and their reason too."""
    out, rounds = _fresh(tmp_path), tmp_path / "rounds"
    write_jsonl(out / "events.jsonl", make_events(2))
    engine = AlgorithmResponder(broken={"On day 1 of the summit": Reply(text="I cannot say.")})
    runs = 1
    while main(_files_args(out, rounds)) == PAUSED:
        source = max(rounds.glob("round-*.input.jsonl"))
        target = source.with_name(source.name.replace(".input.", ".output."))
        target.write_text("\n".join(answer_batch_file(source.read_text().splitlines(), engine)))
        runs += 1
    summary = capsys.readouterr().out.splitlines()
    whole = next(line for line in summary if line.startswith("  the stage as a whole: "))
    calls = _cached_calls(out)
    assert whole.startswith("  the stage as a whole: 1 candidates (")
    assert (f"), 1 failed; {calls} calls, " in whole
            and "; 3 outputs refused by their step check, most commonly UnknownQuestionGen: "
            in whole and whole.endswith(f" (3); {runs - 1} batch files read ({calls} requests; "
                                     f"{calls} answered, 0 failed)"))


def test_hand_written_output_lines_are_read_failed_ones_asked_again(tmp_path: Path) -> None:
    out, rounds = _fresh(tmp_path), tmp_path / "rounds"
    write_jsonl(out / "events.jsonl", make_events(1))
    assert main(_files_args(out, rounds)) == PAUSED
    first = [json.loads(line) for line in
             (rounds / "round-001.input.jsonl").read_text().splitlines()]
    assert len(first) == 2
    passage, question = sorted(first, key=lambda line: "passage" not in str(line["body"]))
    answer = {"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "Which council met on day zero of the summit?"}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 9}}
    (rounds / "round-001.output.jsonl").write_text(
        json.dumps({"id": "vllm-1", "custom_id": question["custom_id"], "response": {
            "status_code": 200, "request_id": "r1", "body": answer}, "error": None}) + "\n"
        + json.dumps({"id": "vllm-2", "custom_id": passage["custom_id"], "response": {
            "status_code": 500, "request_id": "r2", "body": None}, "error": "out of memory"})
        + "\n"
        + json.dumps({"id": "vllm-3", "custom_id": "not-ours", "response": None,
                      "error": None}) + "\n"
    )
    assert main(_files_args(out, rounds)) == PAUSED
    second = [json.loads(line) for line in
              (rounds / "round-002.input.jsonl").read_text().splitlines()]
    assert [line["custom_id"] for line in second] == [passage["custom_id"]]
    cache = CallCache(out / "llm-cache.sqlite")
    try:
        row = cache.get(question["custom_id"])
        assert row is not None and row.prompt_tokens == 40 and row.template == (
            "unknown_question_gen")
        assert row.response["choices"][0]["message"]["content"].startswith("Which council")
    finally:
        cache.close()


# --- output files that cannot be trusted as they are (issue 22) --------------------------------


def _first_round(tmp_path: Path, events: int = EVENTS) -> tuple[Path, Path, list[str]]:
    """A run stopped at its first round: the run, the rounds directory, round 1's input lines."""
    out, rounds = _fresh(tmp_path), tmp_path / "rounds"
    write_jsonl(out / "events.jsonl", make_events(events))
    assert main(_files_args(out, rounds)) == PAUSED
    return out, rounds, (rounds / "round-001.input.jsonl").read_text().splitlines()


def _requests(lines: list[str]) -> dict[str, Any]:
    return {(line := json.loads(text))["custom_id"]: line for text in lines}


def _answers(lines: list[str]) -> list[str]:
    return answer_batch_file(lines, AlgorithmResponder())


def test_an_output_file_that_answers_none_of_its_requests_keeps_the_round_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out, rounds, lines = _first_round(tmp_path, events=5)
    target = rounds / "round-001.output.jsonl"
    foreign = [json.dumps({**json.loads(line), "custom_id": f"other-{n}"})
               for n, line in enumerate(_answers(lines))]
    for wrong in ("", "\n".join(foreign) + "\n"):
        target.write_text(wrong)
        assert main(_files_args(out, rounds)) == PAUSED
        assert f"round-001.output.jsonl answers 0 of its {len(lines)} requests (wrong file?)" \
            in capsys.readouterr().err
        assert not (rounds / "round-002.input.jsonl").exists()  # nothing asked again
        assert _cached_calls(out) == 0
    target.write_text("\n".join(_answers(lines)) + "\n")
    assert main(_files_args(out, rounds)) == PAUSED
    assert _cached_calls(out) == len(lines) and (rounds / "round-002.input.jsonl").exists()


def test_a_half_written_output_waits_unless_a_partial_round_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out, rounds, lines = _first_round(tmp_path)
    answers = _answers(lines)
    # The engine has written 5 lines and is in the middle of the 6th.
    (rounds / "round-001.output.jsonl").write_text("\n".join(answers[:5]) + "\n"
                                                    + answers[5][:40])
    assert main(_files_args(out, rounds)) == PAUSED
    assert f"5 of {len(lines)} answered; is the engine still writing?" in capsys.readouterr().err
    assert not (rounds / "round-002.input.jsonl").exists() and _cached_calls(out) == 0
    assert main(_files_args(out, rounds, "--accept-partial-round")) == PAUSED
    asked_again = {json.loads(line)["custom_id"] for line in
                   (rounds / "round-002.input.jsonl").read_text().splitlines()}
    keys = [json.loads(line)["custom_id"] for line in lines]
    assert set(keys[5:]) <= asked_again and not set(keys[:5]) & asked_again
    assert _cached_calls(out) == 5


def test_accept_partial_round_is_documented_and_needs_batch_files(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--accept-partial-round" in capsys.readouterr().out
    assert "--accept-partial-round" in docs_page("batch.md")
    with pytest.raises(SystemExit) as usage:
        main(["--out", "x", "--stage", "generate", "--accept-partial-round"])
    assert usage.value.code == 2 and "give --batch-files DIR too" in capsys.readouterr().err


def test_a_malformed_line_is_one_failed_line_and_the_good_ones_are_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    out, rounds, lines = _first_round(tmp_path, events=3)
    answers = [json.loads(line) for line in _answers(lines)]
    answers[1]["response"]["body"]["usage"] = "lots"
    answers[3]["response"]["body"]["choices"][0]["logprobs"] = "many"
    (rounds / "round-001.output.jsonl").write_text(
        "".join(json.dumps(a) + "\n" for a in answers))
    assert main(_files_args(out, rounds)) == PAUSED
    asked_again = [json.loads(line)["custom_id"] for line in
                   (rounds / "round-002.input.jsonl").read_text().splitlines()]
    assert {answers[1]["custom_id"], answers[3]["custom_id"]} <= set(asked_again)
    assert _cached_calls(out) == len(lines) - 2  # the good answers of that file are stored
    assert "round-001.output.jsonl:2: malformed line (usage: " in caplog.text
    assert "round-001.output.jsonl:4: malformed line (choices.0.logprobs: " in caplog.text


def test_an_output_file_that_is_no_utf8_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out, rounds, lines = _first_round(tmp_path, events=3)
    text = "\n".join(_answers(lines)) + "\n"
    target = rounds / "round-001.output.jsonl"
    target.write_text(text, encoding="utf-16")
    assert main(_files_args(out, rounds)) == 1
    err = capsys.readouterr().err
    assert "round-001.output.jsonl is not UTF-8 text" in err and "Traceback" not in err
    assert _cached_calls(out) == 0 and not (rounds / "round-002.input.jsonl").exists()
    target.write_text(text, encoding="utf-8")
    assert main(_files_args(out, rounds)) == PAUSED and _cached_calls(out) == len(lines)


def test_batch_files_naming_a_file_is_one_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out = _fresh(tmp_path)
    a_file = tmp_path / "round-001.output.jsonl"
    a_file.write_text("")
    with pytest.raises(SystemExit) as usage:
        main(_files_args(out, a_file))
    err = capsys.readouterr().err
    assert usage.value.code == 2 and "Traceback" not in err
    assert f"--batch-files takes a directory (the round files go in it); {a_file} is a file" \
        in err


def test_a_deleted_input_file_is_written_again_from_the_recorded_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out, rounds, lines = _first_round(tmp_path, events=3)
    source = rounds / "round-001.input.jsonl"
    source.unlink()
    assert main(_files_args(out, rounds)) == PAUSED
    assert f"{source} was gone: written again from the {len(lines)} requests" \
        in capsys.readouterr().err
    assert _requests(source.read_text().splitlines()) == _requests(lines)
    (rounds / "round-001.output.jsonl").write_text("\n".join(_answers(lines)) + "\n")
    assert main(_files_args(out, rounds)) == PAUSED and _cached_calls(out) == len(lines)


def test_a_relative_rounds_directory_is_found_from_another_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = _fresh(tmp_path)
    write_jsonl(out / "events.jsonl", make_events(3))
    first, elsewhere = tmp_path / "first", tmp_path / "elsewhere"
    first.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(first)
    assert main(_files_args(out, Path("rounds"))) == PAUSED
    lines = (first / "rounds" / "round-001.input.jsonl").read_text().splitlines()
    (first / "rounds" / "round-001.output.jsonl").write_text(
        "\n".join(_answers(lines)) + "\n")
    monkeypatch.chdir(elsewhere)
    assert main(_files_args(out, Path("rounds"))) == PAUSED
    assert _cached_calls(out) == len(lines)
    assert (elsewhere / "rounds" / "round-001.input.jsonl").exists()  # the next round
