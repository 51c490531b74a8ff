"""One writer per run (issue 22): real `cuqa-build`, `cuqa-annotate` and `cuqa-eval` processes
on one run directory at once, against the scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from cuqa_builder.run_lock import LOCK_FILE, LockHolder, run_lock
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder
from cuqa_builder.testing.openai_server import ScriptedLLM

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "wiki-sample"
ENV = {**os.environ, "OPENAI_API_KEY": "sk-test-lock-0000000",
       "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
ENV.pop("OPENAI_BASE_URL", None)
BUSY = re.compile(r"another cuqa-build \(pid (\d+)\) is working on (\S+) since \d\d:\d\d")


def build(run: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "cuqa_builder.cli.build", "--out", str(run), "-q", *flags]


def generate(run: Path, llm: ScriptedLLM, *flags: str) -> list[str]:
    # One call at a time, each answered after a while: the command runs for seconds.
    return build(run, "--stage", "generate", "--limit", "6", "--base-url", llm.base_url,
                 "--model", "scripted", "--concurrency", "1", "--max-retries", "0",
                 "--prompts", "paper", *flags)


@pytest.fixture(scope="module")
def events_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("events") / "run"
    done = subprocess.run(build(run, "--stage", "events", "--source", str(SAMPLE), "--cutoff",
                                "2023-04", "--until", "2023-12-31"),
                          env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return run


@pytest.fixture
def run(events_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(events_run, copy)
    return copy


def wait_until(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        assert process.poll() is None, "the first command ended before the second started"
        assert time.monotonic() < deadline
        time.sleep(0.02)


def paid_twice(llm: ScriptedLLM) -> int:
    sent = Counter(json.dumps([r["messages"], r.get("seed")], sort_keys=True)
                   for r in llm.requests)
    return sum(count - 1 for count in sent.values())


def candidate_ids(run: Path) -> list[str]:
    lines = (run / "candidates.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["id"] for line in lines]


def start(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_a_second_generate_on_the_same_run_is_refused_and_nothing_is_paid_twice(
    run: Path,
) -> None:
    with ScriptedLLM(AlgorithmResponder(delay_s=0.3)) as llm:
        first = start(generate(run, llm))
        wait_until(lambda: llm.calls >= 2, first)
        second = subprocess.run(generate(run, llm), env=ENV, capture_output=True, text=True,
                                timeout=120)
        assert first.poll() is None, "the first command ended before the second was refused"
        _, first_err = first.communicate(timeout=300)
    assert second.returncode == 1, second.stderr
    busy = BUSY.search(second.stderr)
    assert busy and int(busy.group(1)) == first.pid and busy.group(2) == str(run), second.stderr
    assert "--wait-for-lock" in second.stderr and "Traceback" not in second.stderr
    assert first.returncode == 0, first_err
    assert paid_twice(llm) == 0
    ids = candidate_ids(run)
    assert ids and len(ids) == len(set(ids))
    assert (run / LOCK_FILE).read_text() == "", "a clean exit leaves no holder named"


def test_validate_started_while_generate_appends_is_refused(run: Path) -> None:
    with ScriptedLLM(AlgorithmResponder(delay_s=0.3)) as llm:
        first = start(generate(run, llm))
        wait_until(lambda: llm.calls >= 2, first)
        validate = subprocess.run(build(run, "--stage", "validate"), env=ENV,
                                  capture_output=True, text=True, timeout=120)
        first_out, first_err = first.communicate(timeout=300)
    assert validate.returncode == 1 and BUSY.search(validate.stderr), validate.stderr
    assert first.returncode == 0, first_err
    made = re.search(r"(\d+) new candidates", first_out)
    assert made, first_out
    # what the summary counts is what the file holds: validate orphaned no append
    assert int(made.group(1)) == len(candidate_ids(run)) > 0
    assert all(json.loads(line)["validation"] is None
               for line in (run / "candidates.jsonl").read_text().splitlines())


def test_with_wait_for_lock_the_second_command_waits_and_pays_nothing_again(run: Path) -> None:
    with ScriptedLLM(AlgorithmResponder(delay_s=0.3)) as llm:
        first = start(generate(run, llm))
        wait_until(lambda: llm.calls >= 2, first)
        second = subprocess.run(generate(run, llm, "--wait-for-lock"), env=ENV,
                                capture_output=True, text=True, timeout=300)
        first.communicate(timeout=300)
    assert first.returncode == 0
    assert second.returncode == 0, second.stderr
    assert BUSY.search(second.stderr) and "waiting for it to finish" in second.stderr
    assert paid_twice(llm) == 0
    ids = candidate_ids(run)
    assert len(ids) == len(set(ids)) > 0


def test_a_lock_left_by_a_killed_command_is_taken_over(run: Path) -> None:
    with ScriptedLLM(AlgorithmResponder(delay_s=0.3)) as llm:
        killed = start(generate(run, llm))
        wait_until(lambda: llm.calls >= 2, killed)
        killed.kill()
        killed.communicate()
        left = LockHolder.model_validate_json((run / LOCK_FILE).read_text())
        assert left.pid == killed.pid and left.program == "cuqa-build"
        again = subprocess.run(generate(run, llm), env=ENV, capture_output=True, text=True,
                               timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"took over the lock of cuqa-build (pid {killed.pid}" in again.stderr
    ids = candidate_ids(run)
    assert len(ids) == len(set(ids)) > 0


@pytest.mark.parametrize("argv", [
    ["cuqa_builder.cli.annotate", "import", "{export}", "--run", "{run}"],
    ["cuqa_builder.cli.evaluate", "--data", "{data}", "--method", "direct", "--out", "{run}",
     "--model", "scripted", "--base-url", "http://127.0.0.1:9/v1"],
    ["cuqa_builder.cli.evaluate", "cutoff", "--events", "{data}", "--out", "{run}",
     "--model", "scripted", "--base-url", "http://127.0.0.1:9/v1"],
], ids=["annotate-import", "eval-run", "eval-cutoff"])
def test_annotate_import_and_eval_take_the_same_lock(run: Path, argv: list[str]) -> None:
    (run / "candidates.jsonl").write_text("", encoding="utf-8")
    export = run.parent / "export.json"
    export.write_text("[]", encoding="utf-8")
    values = {"run": str(run), "export": str(export), "data": str(run / "events.jsonl")}
    before = sorted(p.name for p in run.iterdir())
    with run_lock(run, "cuqa-build"):
        refused = subprocess.run([sys.executable, "-m", *(a.format(**values) for a in argv)],
                                 env=ENV, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1, refused.stderr
    busy = BUSY.search(refused.stderr)
    assert busy and int(busy.group(1)) == os.getpid(), refused.stderr
    assert sorted(p.name for p in run.iterdir()) == before, "the refused command wrote"


def test_annotate_import_into_a_run_that_is_not_there_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cuqa_builder.cli.annotate import main as annotate

    export = tmp_path / "export.json"
    export.write_text("[]", encoding="utf-8")
    assert annotate(["import", str(export), "--run", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'nowhere'} is not a run directory: run cuqa-build --out" in err
    assert not (tmp_path / "nowhere").exists()
