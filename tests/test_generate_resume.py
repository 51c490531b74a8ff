"""A SIGKILLed generate run resumes: no duplicate, nothing lost, no answered call paid twice.

The scripted server answers a fixed number of calls and then holds every later request, so the
kill lands while calls are in flight but after every answered call has been received and cached.
Held requests were never answered; the resumed run asks them again, and the number of answered
calls over both runs must equal what one clean run needs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM

REPO = Path(__file__).resolve().parents[1]
EVENTS = 24
CONCURRENCY = 4


class GatedResponder:
    """Answer the first `budget` requests (None: all); hold later ones until `release` is set."""

    def __init__(self, budget: int | None) -> None:
        self.inner = AlgorithmResponder(delay_s=0.02)
        self.budget = budget
        self.answered = 0
        self.held = 0
        self.release = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            answer = self.budget is None or self.answered < self.budget
            if answer:
                self.answered += 1
            else:
                self.held += 1
        if answer:
            return self.inner(body)
        self.release.wait()
        return Reply(status=503, text="held until the client was gone")


def _args(out: Path, llm: ScriptedLLM) -> list[str]:
    return ["--out", str(out), "--cutoff", "2023-04", "--prompts", "paper", "--stage", "generate",
            "-q",
            "--base-url", llm.base_url, "--model", "scripted", "--concurrency", str(CONCURRENCY)]


def _start(out: Path, llm: ScriptedLLM) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    env.update(OPENAI_API_KEY="sk-test-dummy", PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "cuqa_builder.cli.build", *_args(out, llm)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _wait_until_stalled(gate: GatedResponder, out: Path, deadline_s: float = 90.0) -> None:
    """Until the budget is spent, some candidates exist and no request arrived for a second."""
    deadline = time.monotonic() + deadline_s
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        arrived = gate.answered + gate.held
        if arrived != seen:
            seen, quiet_since = arrived, time.monotonic()
        stalled = gate.answered == gate.budget and time.monotonic() - quiet_since > 1.0
        if stalled and read_jsonl(out / "candidates.jsonl", Candidate):
            return
        time.sleep(0.05)
    raise AssertionError(f"run did not stall: answered {gate.answered}, held {gate.held}")


def test_sigkilled_run_resumes_without_duplicates_or_repeated_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    events = make_events(EVENTS)
    clean_dir, killed_dir = tmp_path / "clean", tmp_path / "killed"
    for out in (clean_dir, killed_dir):
        write_jsonl(out / "events.jsonl", events)

    clean_gate = GatedResponder(budget=None)
    with ScriptedLLM(clean_gate) as llm:
        assert main(_args(clean_dir, llm)) == 0
    clean_calls = clean_gate.answered
    assert clean_calls == 4 * EVENTS

    gate = GatedResponder(budget=clean_calls // 2)
    with ScriptedLLM(gate) as llm:
        process = _start(killed_dir, llm)
        try:
            _wait_until_stalled(gate, killed_dir)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        gate.release.set()
        done_at_kill = len(read_jsonl(killed_dir / "candidates.jsonl", Candidate))
        in_flight_at_kill = gate.held
        assert 0 < done_at_kill < EVENTS and in_flight_at_kill > 0

        gate.budget = None
        resumed = _start(killed_dir, llm)
        _, stderr = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, stderr.decode()

    items = read_jsonl(killed_dir / "candidates.jsonl", Candidate)
    assert len(items) == len({c.id for c in items}) == EVENTS
    clean = {c.id: c.model_dump() for c in read_jsonl(clean_dir / "candidates.jsonl", Candidate)}
    assert {c.id: c.model_dump() for c in items} == clean
    # Every call answered before the kill came from the cache; only the held ones were asked again.
    assert gate.answered == clean_calls


class CountingResponder:
    """Answer every request after `delay_s`, counting the requests seen and answered."""

    def __init__(self, delay_s: float) -> None:
        self.inner = AlgorithmResponder()
        self.delay_s = delay_s
        self.seen = 0
        self.answered = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.seen += 1
        time.sleep(self.delay_s)
        reply = self.inner(body)
        with self._lock:
            self.answered += 1
        return reply


def _start_with_ctrl_c(out: Path, llm: ScriptedLLM) -> subprocess.Popen[bytes]:
    """The command with Ctrl-C answered as a terminal's would be, however this test was started
    (a background job inherits SIGINT ignored, and a Python child keeps ignoring it)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    env.update(OPENAI_API_KEY="sk-test-dummy", PYTHONPATH=str(REPO))
    code = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from cuqa_builder.cli.build import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.Popen([sys.executable, "-c", code, *_args(out, llm)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_ctrl_c_keeps_every_answer_on_its_way_and_the_resumed_run_pays_none_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38.7: SIGINT while calls are in flight. Their requests were seen by the endpoint
    (and paid): the interrupted command waits for their answers and caches them, so that the
    requests the endpoint sees over the interrupted and the resumed command are those of one
    clean run, none twice."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    events = make_events(EVENTS)
    clean_dir, run_dir = tmp_path / "clean", tmp_path / "interrupted"
    for out in (clean_dir, run_dir):
        write_jsonl(out / "events.jsonl", events)
    clean = CountingResponder(delay_s=0.0)
    with ScriptedLLM(clean) as llm:
        assert main(_args(clean_dir, llm)) == 0
    assert clean.seen == 4 * EVENTS

    slow = CountingResponder(delay_s=0.6)
    with ScriptedLLM(slow) as llm:
        process = _start_with_ctrl_c(run_dir, llm)
        deadline = time.monotonic() + 90
        while not (slow.seen >= clean.seen // 3 and slow.seen > slow.answered):
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        in_flight = slow.seen - slow.answered
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 130, stderr.decode()
        assert in_flight > 0 and slow.answered == slow.seen
        interrupted = slow.seen
        assert interrupted < clean.seen
        slow.delay_s = 0.0
        assert main(_args(run_dir, llm)) == 0
    assert slow.seen == clean.seen  # every request once, over both commands
    clean_items = {c.id: c.model_dump() for c in read_jsonl(clean_dir / "candidates.jsonl",
                                                            Candidate)}
    assert {c.id: c.model_dump() for c in read_jsonl(run_dir / "candidates.jsonl",
                                                     Candidate)} == clean_items
