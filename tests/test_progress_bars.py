"""Every progress bar ends at 100 % (issue 32: "articles: 87% 93/107", "bridges: 83% 5/6"): its
total is what it counts, and what it skips or loses counts too. Read from what the bars wrote
to stderr in real CLI runs against the scripted model."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.build import main as build
from cuqa_builder.cli.evaluate import main as evaluate
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.jsonio import read_jsonl
from cuqa_builder.records.candidates import Candidate, GenerationFailure
from cuqa_builder.records.events import Entity, Event
from cuqa_builder.stages.ground import easy_steps
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM
from cuqa_builder.testing.pool_llm import PoolResponder
from tests.conftest import ctrl_c_reaches_children
from tests.test_connected import SAMPLE
from tests.test_eval_cli import Q_G20, scripted_model

_BAR = re.compile(r"^(?P<desc>[a-z][\w -]*): +(?P<percent>\d+)%\|[^|]*\| (?P<n>\d+)/(?P<total>\d+)")


def last_states(stderr: str) -> dict[str, str]:
    """Each bar's last rendering, by its description: "23/23 100%"."""
    states = {}
    for line in re.split(r"[\r\n]", stderr):
        if bar := _BAR.match(line.strip()):
            states[bar["desc"]] = f"{bar['n']}/{bar['total']} {bar['percent']}%"
    return states


def mentions_and_distinct(entities: list[Entity]) -> tuple[int, int]:
    return len(entities), len({entity_key(e) for e in entities})


def test_every_bar_of_a_build_ends_at_100_percent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The connected recipe looks its bridges' articles up (several events name the same
    entity) and the ground stage its items' bridges (several items share one): those bars
    counted mentions while the lookups count each entity once."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-bars")
    run = tmp_path / "run"
    with ScriptedLLM(PoolResponder()) as llm:
        assert build(["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE),
                      "--out", str(run), "--limit", "8", "--hard", "1",
                      "--base-url", llm.base_url, "--model", "scripted"]) == 0
    states = last_states(capsys.readouterr().err)
    assert set(states) >= {"parsing", "articles", "generate", "hard", "bridges", "checker"}
    assert {bar: state for bar, state in states.items() if not state.endswith(" 100%")} == {}
    # the events generate took end in candidates.jsonl or generation-failures.jsonl
    items = read_jsonl(run / "candidates.jsonl", Candidate)
    taken = {i.event.id for i in items} | {f.event_id for f in read_jsonl(
        run / "generation-failures.jsonl", GenerationFailure) if f.event_id}
    named = [e for event in read_jsonl(run / "events.jsonl", Event) if event.id in taken
             for e in event.entities]
    mentions, articles = mentions_and_distinct(named)
    bridged, bridges = mentions_and_distinct([s.cur_ent for i in items for s in easy_steps(i)])
    assert mentions > articles and bridged > bridges  # a bar of mentions would stop short
    assert states["articles"] == f"{articles}/{articles} 100%"
    assert states["bridges"] == f"{bridges}/{bridges} 100%"


def test_an_evaluation_bar_counts_the_items_it_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-bars")
    data = tmp_path / "q.jsonl"
    data.write_text("".join(f'{{"question": "{q}", "answers": ["x"]}}\n' for q in (
        Q_G20, "Which country hosted the first AI Safety Summit?", "What is the capital of India?",
    )), encoding="utf-8")
    with ScriptedLLM(scripted_model(broken={Q_G20})) as llm:
        assert evaluate(["run", "--data", str(data), "--method", "direct", "--model", "scripted",
                         "--base-url", llm.base_url, "--out", str(tmp_path / "e")]) == 0
    captured = capsys.readouterr()
    assert "2 new, 0 resumed, 1 failed" in captured.out
    assert last_states(captured.err) == {"direct": "3/3 100%"}


class HeldChecker(PoolResponder):
    """The pool's scripted model, holding every request after the first `answered` until the
    test is done (the held ones are never answered)."""

    def __init__(self, answered: int) -> None:
        super().__init__()
        self.answered = answered
        self.count = 0
        self.lock = threading.Lock()
        self.holding = threading.Event()
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.count += 1
            hold = self.count > self.answered
        if hold:
            self.holding.set()
            self.release.wait(timeout=120)
        return super().__call__(body)


def test_after_ctrl_c_a_bar_shows_what_was_done(tmp_path: Path) -> None:
    """Ctrl-C while the checker is asked (a real `cuqa-build`): the checker's bar stops at the
    items answered, not at its total (issue 40: it showed 8/8 when 2 of 8 were done)."""
    run = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-bars"}
    window = ["--cutoff", "2023-04", "--until", "2023-12-31", "--out", str(run), "--model",
              "scripted"]
    with ScriptedLLM(PoolResponder()) as llm:  # no checker while composing: validate asks it
        assert build([*window, "--source", str(SAMPLE), "--limit", "8", "--stage", "events",
                      "--base-url", llm.base_url]) == 0
        assert build([*window, "--stage", "generate", "--check-model", "none", "--base-url",
                      llm.base_url]) == 0
    responder = HeldChecker(answered=2)
    with ScriptedLLM(responder) as llm:
        with ctrl_c_reaches_children():
            process = subprocess.Popen(
                [sys.executable, "-m", "cuqa_builder.cli.build", *window, "--stage",
                 "validate", "--base-url", llm.base_url, "--concurrency", "4"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert responder.holding.wait(timeout=120)
            time.sleep(1)  # the answered items' bar updates are drawn
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=120)
        finally:
            responder.release.set()
            if process.poll() is None:
                process.kill()
    assert process.returncode == 130, err[-2000:]
    done, total = map(int, last_states(err)["checker"].split()[0].split("/"))
    assert done <= 2 < total  # at most the 2 answered: each item needs at least one call
