"""The whole pipeline under a fault matrix (issue 15): endpoint errors, kill -9 in each stage that
works for a while, a full disk, a torn last line. After the fault and a plain re-run of the same
command, the run's outputs equal a clean run's, and no LLM call that had completed (its answer in
the call cache) is paid again.

The runs are real `cuqa-build` processes against the shipped example snapshot and a scripted
OpenAI-compatible server on 127.0.0.1, or (`--batch-files`) the scripted model answering each
round's file as an offline engine would.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.testing.algorithm_llm import AlgorithmResponder
from cuqa_builder.testing.batch_server import answer_batch_file
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "wiki-sample"
OUTPUTS = ("events.jsonl", "candidates.jsonl", "cuqa.jsonl")
ENV = {**os.environ, "OPENAI_API_KEY": "sk-test-faults-000000"}
ENV.pop("OPENAI_BASE_URL", None)


def fingerprint(request: dict[str, Any]) -> str:
    """What identifies one call, whether seen on the wire or read back from the call cache."""
    sent = {key: request.get(key) for key in ("messages", "seed", "temperature", "max_tokens")}
    return json.dumps(sent, sort_keys=True)


class Endpoint:
    """The scripted model, with faults switched on or off; it records every answered call."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.inner = AlgorithmResponder(delay_s=delay_s)
        self.fail_every = 0  # answer 503 to every n-th request (0: never)
        self.seen = 0
        self.answered: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.seen += 1
            if self.fail_every and self.seen % self.fail_every == 0:
                return Reply(text="the service is overloaded", status=503)
            self.answered.append(fingerprint(body))
        return self.inner(body)

    def take_answered(self) -> list[str]:
        with self.lock:
            answered, self.answered = self.answered, []
        return answered


def command(run: Path, llm: ScriptedLLM) -> list[str]:
    return [
        sys.executable, "-m", "cuqa_builder.cli.build", "--out", str(run), "--source",
        str(SAMPLE), "--cutoff", "2023-04", "--prompts", "paper", "--until", "2023-12-31",
        "--limit", "6",
        "--base-url", llm.base_url, "--model", "scripted", "--probe-model", "scripted",
        "--max-retries", "0", "--concurrency", "2", "-q",
        # the known passages from the sample's articles: the scripted model's own "knowledge"
        # fails grounding, and only items that pass every check reach the probes
        "--known-source", "wiki",
    ]


def outputs(run: Path) -> dict[str, list[str]]:
    """Each output's lines, sorted: candidates are appended in the order they finish."""
    return {name: sorted((run / name).read_text(encoding="utf-8").splitlines())
            for name in OUTPUTS}


def cached_calls(run: Path) -> set[str]:
    path = run / "llm-cache.sqlite"
    if not path.exists():
        return set()
    with sqlite3.connect(path) as db:
        return {fingerprint(json.loads(row[0])) for row in db.execute("SELECT request FROM calls")}


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    run = tmp_path_factory.mktemp("clean") / "run"
    endpoint = Endpoint()
    with ScriptedLLM(endpoint) as llm:
        done = subprocess.run(command(run, llm), env=ENV, capture_output=True, text=True,
                              timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(set(endpoint.answered)) == len(endpoint.answered), "a clean run repeated a call"
    return outputs(run)


def kill_when(condition: Callable[[], bool], process: subprocess.Popen[str]) -> bool:
    """SIGKILL the process once `condition` holds; False if it ended first."""
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        if condition():
            process.kill()
            process.wait()
            return True
        time.sleep(0.02)
    return False


def limit_file_size(max_bytes: int) -> Callable[[], None]:
    def apply() -> None:  # in the child: a write past the limit fails with EFBIG, like ENOSPC
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    return apply


def probing(endpoint: Endpoint) -> Callable[[], bool]:
    return lambda: any("with just a few words" in call for call in endpoint.answered)


FAULTS = ["endpoint-errors", "kill-in-events", "kill-in-generate", "kill-in-validate",
          "disk-full", "torn-last-line"]


@pytest.mark.parametrize("fault", FAULTS)
def test_after_a_fault_a_rerun_equals_a_clean_run_and_pays_nothing_twice(
    fault: str, clean: dict[str, list[str]], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    endpoint = Endpoint(delay_s=0.05)
    with ScriptedLLM(endpoint) as llm:
        argv = command(run, llm)
        if fault == "endpoint-errors":
            endpoint.fail_every = 3
            failed = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300)
            assert failed.returncode in (0, 1), failed.stderr
            endpoint.fail_every = 0
        elif fault == "disk-full":
            full = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300,
                                  preexec_fn=limit_file_size(96 * 1024))
            assert full.returncode != 0
            assert "Traceback" not in full.stderr and "error:" in full.stderr, full.stderr
        elif fault == "torn-last-line":
            assert subprocess.run(argv, env=ENV, capture_output=True, timeout=300).returncode == 0
            candidates = run / "candidates.jsonl"
            text = candidates.read_text(encoding="utf-8")
            candidates.write_text(text[: len(text) - 40], encoding="utf-8")  # died mid-write
        else:
            process = subprocess.Popen(argv, env=ENV, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, text=True)
            condition = {
                "kill-in-events": lambda: (run / "run.json").exists(),
                "kill-in-generate": lambda: len(endpoint.answered) >= 5,
                "kill-in-validate": probing(endpoint),
            }[fault]
            assert kill_when(condition, process), f"the run ended before the {fault} point"
        completed = cached_calls(run)
        endpoint.take_answered()

        rerun = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        paid_again = [call for call in endpoint.take_answered() if call in completed]

    assert not paid_again, f"{len(paid_again)} completed calls were paid again"
    assert outputs(run) == clean


def test_a_concurrent_writer_is_refused_and_the_run_equals_a_clean_one(
    clean: dict[str, list[str]], tmp_path: Path
) -> None:
    """The same command started twice at once on one --out (issue 22): the second is refused
    while the first works; the first's outputs equal a clean run's, and no call is paid twice."""
    run = tmp_path / "run"
    endpoint = Endpoint(delay_s=0.3)  # the first is still working when the second has started
    with ScriptedLLM(endpoint) as llm:
        argv = command(run, llm)
        first = subprocess.Popen(argv, env=ENV, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while len(endpoint.answered) < 5:  # well into generate
            assert first.poll() is None and time.monotonic() < deadline, "the run ended early"
            time.sleep(0.02)
        second = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300)
        _, first_err = first.communicate(timeout=300)
        answered = endpoint.take_answered()

    assert second.returncode == 1, second.stderr
    assert f"another cuqa-build (pid {first.pid}) is working on {run}" in second.stderr
    assert first.returncode == 0, first_err
    assert len(answered) == len(set(answered)), "a call was paid twice"
    assert outputs(run) == clean


def batch_files_command(run: Path, rounds: Path) -> list[str]:
    """The same command with its calls in round files for an offline engine: no endpoint."""
    with ScriptedLLM(Endpoint()) as unused:  # only its URL is in the command, and dropped
        argv = command(run, unused)
    at = argv.index("--base-url")
    return [*argv[:at], *argv[at + 2:], "--batch-files", str(rounds)]


def test_a_half_written_round_is_not_read_and_a_rerun_equals_a_clean_run(
    clean: dict[str, list[str]], tmp_path: Path
) -> None:
    run, rounds = tmp_path / "run", tmp_path / "rounds"
    argv = batch_files_command(run, rounds)
    engine = AlgorithmResponder()
    faulted = False
    for _ in range(20):
        done = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300)
        if done.returncode == 0:
            break
        assert done.returncode == 75, done.stderr
        source = max(rounds.glob("round-*.input.jsonl"))
        target = source.with_name(source.name.replace(".input.", ".output."))
        answers = answer_batch_file(source.read_text().splitlines(), engine)
        if faulted or source.name != "round-002.input.jsonl":
            target.write_text("\n".join(answers) + "\n")
            continue
        # The engine has written half its lines and is in the middle of the next one.
        half = len(answers) // 2
        target.write_text("\n".join(answers[:half]) + "\n" + answers[half][:30])
        cached = cached_calls(run)
        waiting = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300)
        assert waiting.returncode == 75 and "Traceback" not in waiting.stderr
        assert f"{half} of {len(answers)} answered; is the engine still writing?" \
            in waiting.stderr
        assert not (rounds / "round-003.input.jsonl").exists() and cached_calls(run) == cached
        target.write_text("\n".join(answers) + "\n")  # the engine finishes
        faulted = True
    assert faulted and done.returncode == 0, done.stderr
    asked = [json.loads(line)["custom_id"] for path in sorted(rounds.glob("round-*.input.jsonl"))
             for line in path.read_text().splitlines()]
    assert len(asked) == len(set(asked)), "a call was written into two rounds"
    assert outputs(run) == clean
