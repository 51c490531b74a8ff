"""The whole pipeline under a fault matrix (issue 15): endpoint errors, kill -9 in each stage that
works for a while, a full disk, a torn last line. After the fault and a plain re-run of the same
command, the run's outputs equal a clean run's, and no LLM call that had completed (its answer in
the call cache) is paid again.

The runs are real `cuqa-build` processes against the shipped example snapshot and a scripted
OpenAI-compatible server on 127.0.0.1, or (`--batch-files`) the scripted model answering each
round's file as an offline engine would.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate, GenerationFailure
from cuqa_builder.records.events import Entity, Event
from cuqa_builder.run import CANDIDATES, EVENTS, GENERATION_FAILURES
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.batch_server import answer_batch_file
from cuqa_builder.testing.mediawiki_server import MediaWikiServer
from cuqa_builder.testing.openai_server import Reply, Responder, ScriptedLLM, last_user_message
from cuqa_builder.testing.pool_llm import PoolResponder
from cuqa_builder.verification.answers import answer_names, decided
from cuqa_builder.verification.masking import masked_question
from tests.test_cli_shell import the_error_line

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
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run the command made without a fault (tests work on copies of it)."""
    run = tmp_path_factory.mktemp("clean") / "run"
    endpoint = Endpoint()
    with ScriptedLLM(endpoint) as llm:
        done = subprocess.run(command(run, llm), env=ENV, capture_output=True, text=True,
                              timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(set(endpoint.answered)) == len(endpoint.answered), "a clean run repeated a call"
    return run


@pytest.fixture(scope="module")
def clean(finished: Path) -> dict[str, list[str]]:
    return outputs(finished)


@pytest.fixture
def a_copy(finished: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy


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


def last_round(rounds: Path) -> Path:
    return max(rounds.glob("round-*.input.jsonl"))


def output_of(source: Path) -> Path:
    return source.with_name(source.name.replace(".input.", ".output."))


def answer_last_round(rounds: Path, engine: Responder) -> None:
    """What an offline engine does with the newest round's input file."""
    source = last_round(rounds)
    answers = answer_batch_file(source.read_text().splitlines(), engine)
    output_of(source).write_text("\n".join(answers) + "\n")


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
        if faulted or last_round(rounds).name != "round-002.input.jsonl":
            answer_last_round(rounds, engine)
            continue
        source = last_round(rounds)
        target = output_of(source)
        answers = answer_batch_file(source.read_text().splitlines(), engine)
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


# --- issue 26: nothing lost, nothing stuck, nothing silent -----------------------------------


def cuqa_build(*args: str | Path, **popen: Any) -> subprocess.CompletedProcess[str]:
    """A real `cuqa-build` process."""
    argv = [sys.executable, "-m", "cuqa_builder.cli.build", *map(str, args)]
    return subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300, **popen)


def files(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` with its bytes: what a refused command must leave alone."""
    return {str(path.relative_to(directory)): path.read_bytes()
            for path in sorted(directory.rglob("*")) if path.is_file()}


def assert_refused(done: subprocess.CompletedProcess[str], status: int, line: str) -> None:
    """The command ended with `status` and printed one line: `cuqa-build: error: LINE`."""
    assert done.returncode == status, done.stderr
    assert the_error_line(done.stderr, "cuqa-build") == f"cuqa-build: error: {line}"


def without(argv: list[str], flag: str) -> list[str]:
    at = argv.index(flag)
    return [*argv[:at], *argv[at + 2:]]


def test_a_run_built_from_a_snapshot_goes_on_reading_it(
    a_copy: Path, clean: dict[str, list[str]]
) -> None:
    """Fault 1: `--stage all` without `--source` on a run built from one: the snapshot is read
    again (nothing fetched: the wiki is out of reach here, and its manifest is kept), and the
    run equals a clean one, paying nothing again (validate finds the snapshot's articles)."""
    manifest = json.loads((a_copy / "manifest.json").read_text())
    endpoint = Endpoint()
    with ScriptedLLM(endpoint) as llm:
        argv = without(command(a_copy, llm), "--source")
        again = subprocess.run([*argv, "--stage", "all"], env=ENV, capture_output=True,
                               text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert not endpoint.answered
    kept = json.loads((a_copy / "manifest.json").read_text())
    assert {**kept, "fetched": None} == {**manifest, "fetched": None}
    assert kept["snapshot"] == str(SAMPLE)
    assert outputs(a_copy) == clean


def test_a_run_whose_snapshot_moved_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    snapshot, run = tmp_path / "snapshot", tmp_path / "run"
    shutil.copytree(SAMPLE, snapshot)
    made = cuqa_build("--out", run, "--source", snapshot, "--cutoff", "2023-04", "--until",
                      "2023-12-31", "--stage", "events", "-q")
    assert made.returncode == 0, made.stderr
    snapshot.rename(tmp_path / "moved")
    before = files(run)
    with MediaWikiServer({}) as wiki:
        refused = cuqa_build("--out", run, "--stage", "all", "-q", "--wiki-api", wiki.api_url)
        assert not wiki.requests
    assert_refused(refused, 1,
        f"{run} was built from the snapshot {snapshot}, which is not there "
        "(moved, or named relative to another directory): pass --source with that snapshot")
    assert files(run) == before


def test_a_relative_snapshot_is_recorded_whole_and_release_needs_none(tmp_path: Path) -> None:
    """`--source` given relative to where the command ran is found from anywhere after; and
    release, which reads only the run, is not refused when the snapshot has moved."""
    shutil.copytree(SAMPLE, tmp_path / "snapshot")
    made = cuqa_build("--out", "run", "--source", "snapshot", "--cutoff", "2023-04", "--until",
                      "2023-12-31", "--stage", "events", "-q", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["snapshot"] == str(tmp_path / "snapshot")
    (tmp_path / "snapshot").rename(tmp_path / "moved")
    release = cuqa_build("--out", tmp_path / "run", "--stage", "release", "--name", "r", "-q")
    assert release.returncode == 1
    assert release.stderr.endswith("cuqa.jsonl is missing: run the validate stage first\n")


def test_an_event_with_no_entity_to_bridge_fails_alone(tmp_path: Path) -> None:
    """Fault 2: `--known-source model` (the connected recipe) on events of which one names only
    a nationality group: that event goes to generation-failures.jsonl with its reason, the
    others are made."""
    run = tmp_path / "run"
    demonym = Entity(text="Solace Party", label="NORP")
    events = [*make_events(3), *make_events(1, per_event=1, pool=(demonym,))]
    write_jsonl(run / EVENTS, events)
    with ScriptedLLM(PoolResponder()) as llm:
        done = cuqa_build("--out", run, "--cutoff", "2023-04", "--until", "2023-12-31",
                          "--stage", "generate", "--known-source", "model", "-q",
                          "--base-url", llm.base_url, "--model", "scripted")
        assert done.returncode == 0, done.stderr
        asked = {last_user_message(body) for body in llm.requests}
    [failure] = read_jsonl(run / GENERATION_FAILURES, GenerationFailure)
    assert failure.event_id == events[-1].id and failure.step == "Bridges"
    assert failure.reason == ("no entity of the event can be a bridge: 1 a nationality, "
                              "religious or political group (NORP): an adjective, not a thing")
    made = read_jsonl(run / CANDIDATES, Candidate)
    assert {c.event.id for c in made} == {e.id for e in events[:3]}
    assert not any(events[-1].text in prompt for prompt in asked)  # nothing paid for it


def read_only(directory: Path) -> None:
    for path in [directory, *directory.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)


def drop_root_overrides() -> None:
    """In the child, before it runs the command: file modes bind it even as root (the two
    capabilities that let root ignore them leave its bounding set, so the command never has
    them)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, PR_CAPBSET_DROP = 1, 2, 24  # <linux/capability.h>


@pytest.fixture
def modes_bind(tmp_path: Path) -> dict[str, Any]:
    """What to start a command with so that a read-only directory is read-only for it (tests
    here may run as root)."""
    if os.geteuid() != 0:
        return {}
    probe = tmp_path / "probe"
    probe.mkdir()
    read_only(probe)
    try:
        tried = subprocess.run([sys.executable, "-c", f"open({str(probe / 'x')!r}, 'w')"],
                               preexec_fn=drop_root_overrides, capture_output=True)
    except subprocess.SubprocessError as exc:
        pytest.skip(f"root cannot give up overriding file modes here ({exc})")
    if tried.returncode == 0:
        pytest.skip("root still writes into a read-only directory without CAP_DAC_OVERRIDE")
    return {"preexec_fn": drop_root_overrides}


def batch_files_generate(run: Path, rounds: Path, *flags: str) -> list[str]:
    return ["--out", str(run), "--cutoff", "2023-04", "--prompts", "paper", "--stage",
            "generate", "-q", "--batch-files", str(rounds), *flags]


def asked_in_rounds(rounds: Path) -> Counter[str]:
    return Counter(json.loads(line)["custom_id"] for path in rounds.glob("round-*.input.jsonl")
                   for line in path.read_text().splitlines())


class Refusing:
    """An offline engine that answers every request with an error status (and counts them)."""

    def __init__(self) -> None:
        self.answered = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.answered += 1
        return Reply(status=500, text="the engine ran out of memory")


def test_a_batch_request_failing_in_every_round_fails_after_max_retries(tmp_path: Path) -> None:
    """Fault 3: every round of `--batch-files` answered with HTTP 500 and `--max-retries 2`:
    each request is asked in 3 rounds, then fails with its error as a live call does. Issue 31,
    item 9: a later command fails it at once (no round is written for it), until a larger
    `--max-retries` gives it more rounds."""
    run, rounds = tmp_path / "run", tmp_path / "rounds"
    write_jsonl(run / EVENTS, make_events(5))
    argv = batch_files_generate(run, rounds, "--model", "scripted", "--max-retries", "2")
    engine = Refusing()
    for _ in range(10):
        done = cuqa_build(*argv)
        if done.returncode != 75:
            break
        answer_last_round(rounds, engine)
    asked = asked_in_rounds(rounds)
    assert len(asked) == 10 and set(asked.values()) == {3}  # two calls a event, three rounds
    assert engine.answered == 30 and len(list(rounds.glob("*.input.jsonl"))) == 3
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "cuqa-build: error: generate failed: no candidate could be made: 5 failed, most "
        "commonly UnknownQuestionGen: scripted: batch call failed after 3 rounds: HTTP 500: "
        "the engine ran out of memory (asked again only with a larger --max-retries) (5 of 5 "
        f"failures); details in {run / GENERATION_FAILURES}; their batch calls failed in every "
        "round --max-retries allows: a larger --max-retries asks them again")
    failures = read_jsonl(run / GENERATION_FAILURES, GenerationFailure)
    assert len(failures) == 5 and all("after 3 rounds: HTTP 500" in f.reason for f in failures)
    before = files(rounds)
    again = cuqa_build(*argv)
    assert again.returncode == 1 and files(rounds) == before  # nothing asked, nothing paid
    assert again.stderr.strip().splitlines()[-1] == done.stderr.strip().splitlines()[-1]
    more = cuqa_build(*without(argv, "--max-retries"), "--max-retries", "3")
    assert more.returncode == 75 and asked_in_rounds(rounds) == {key: 4 for key in asked}


class FailingFrom:
    """An offline engine whose rounds from the `first`-th on are answered with HTTP 500."""

    def __init__(self, first: int, engine: Responder) -> None:
        self.first, self.engine = first, engine
        self.round = 0
        self.answered = 0

    def answer(self, rounds: Path) -> None:
        self.round += 1
        answer_last_round(rounds, self)

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.answered += 1
        if self.round >= self.first:
            return Reply(status=500, text="the engine ran out of memory")
        return self.engine(body)


def test_requests_that_fail_every_round_end_the_run_however_the_steps_are_planned(
    tmp_path: Path
) -> None:
    """Issue 31, item 9: the connected recipe plans its steps again in every command (a bridge
    whose step failed is replaced, and the next bridge asks calls of its own, some of them the
    failed ones again). Every round from the second answered with HTTP 500, `--max-retries 2`:
    no request is written in more than 3 rounds over all commands, so the run ends (it used to
    go on for ever, 22 rounds of the same requests in 30 commands); a later command fails
    them at once."""
    run, rounds = tmp_path / "run", tmp_path / "rounds"
    common = ["--out", run, "--source", SAMPLE, "--cutoff", "2023-04", "--until", "2023-12-31",
              "--limit", "3", "-q", "--known-source", "wiki"]
    assert cuqa_build(*common, "--stage", "events").returncode == 0
    argv = [*common, "--stage", "generate", "--model", "scripted", "--batch-files", rounds,
            "--max-retries", "2"]
    engine = FailingFrom(2, PoolResponder())
    done = cuqa_build(*argv)
    while done.returncode == 75 and engine.round < 20:
        engine.answer(rounds)
        done = cuqa_build(*argv)
    asked = asked_in_rounds(rounds)
    assert done.returncode == 1 and engine.round <= 13, done.stderr  # 14 commands at most
    assert max(asked.values()) == 3 and engine.answered == sum(asked.values())
    failed = [key for key, n in asked.items() if n == 3]
    assert failed and len(list(rounds.glob("*.input.jsonl"))) <= 13
    error = the_error_line(done.stderr, "cuqa-build")
    assert error.startswith("cuqa-build: error: generate failed: the checker scripted could "
                            "not be asked while composing about ")
    failures = [f for f in read_jsonl(run / GENERATION_FAILURES, GenerationFailure)
                if f.step != "Select"]
    assert failures and all("after 3 rounds: HTTP 500" in f.reason for f in failures)
    before = files(rounds)
    again = cuqa_build(*argv)
    assert again.returncode == 1 and files(rounds) == before
    assert engine.answered == sum(asked.values())


class SameDescriptions(PoolResponder):
    """The connected recipe's model, describing every bridge the same way ("the country struck
    in news item N"): cut to its head, each masked question is "a certain country", so items
    share the checker's requests, as a real model's items about one country do."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        reply = super().__call__(body)
        return Reply(text=reply.text.replace("The subject of news item",
                                             "The country struck in news item"))


def test_every_round_file_of_a_command_is_named_and_every_model_counted(
    tmp_path: Path
) -> None:
    """Issue 31, item 15: the generator's and the probe model's rounds are separate files. A
    command that writes both names both (each with its model); the summary of the stage counts
    every model's files and requests, which the engine answered once each; the records count
    more calls than that, as an answer several items share counts for each, and it says so."""
    run, rounds = tmp_path / "run", tmp_path / "rounds"
    common = ["--out", run, "--source", SAMPLE, "--cutoff", "2023-04", "--until", "2023-12-31",
              "--limit", "8", "-q", "--known-source", "wiki"]
    assert cuqa_build(*common, "--stage", "events").returncode == 0
    argv = [*common, "--stage", "generate", "--model", "scripted", "--probe-model", "probe",
            "--batch-files", rounds]
    engine = FailingFrom(1000, SameDescriptions())  # answers every round
    written: dict[Path, str] = {}  # input file -> model
    both = 0
    done = cuqa_build(*argv)
    while done.returncode == 75 and engine.round < 20:
        new = {path: json.loads(path.read_text().splitlines()[0])["body"]["model"]
               for path in sorted(rounds.glob("round-*.input.jsonl")) if path not in written}
        calls = sum(len(path.read_text().splitlines()) for path in new)
        files = f"{len(new)} batch file{'s' if len(new) > 1 else ''}"
        assert f"waiting for the answers to {calls} calls in {files}" in done.stderr
        for path, model in new.items():
            assert (f"run_batch -i {path} -o {output_of(path)} --model {model}\n"
                    in done.stderr)
        both += len(set(new.values())) == 2
        written |= new
        for path in new:
            answers = answer_batch_file(path.read_text().splitlines(), engine)
            output_of(path).write_text("\n".join(answers) + "\n")
        done = cuqa_build(*argv)
    assert done.returncode == 0, done.stderr
    assert both and set(written.values()) == {"scripted", "probe"}
    lines = {model: sum(len(p.read_text().splitlines()) for p, m in written.items() if m == model)
             for model in ("scripted", "probe")}
    files = {model: sum(m == model for m in written.values()) for model in lines}
    assert engine.answered == sum(lines.values())  # each request written once, answered once
    records = sum(len(c.intermediates.calls) for c in read_jsonl(run / CANDIDATES, Candidate)
                  if c.intermediates is not None)
    records += sum(len(f.calls) for f in read_jsonl(run / GENERATION_FAILURES, GenerationFailure))
    # each request recorded once, the checks' on the event of their first question (issue 37)
    assert records == engine.answered
    whole = next(line for line in done.stdout.splitlines() if "the stage as a whole" in line)
    assert f"; {records} calls, " in whole
    assert whole.endswith(
        f"; {len(written)} batch files read ({engine.answered} requests: scripted "
        f"{lines['scripted']} in {files['scripted']}, probe {lines['probe']} in "
        f"{files['probe']}; {engine.answered} answered, 0 failed)")


def test_a_rounds_directory_that_cannot_be_written_is_one_line(
    tmp_path: Path, modes_bind: dict[str, Any]
) -> None:
    """Fault 4: no asyncio "Task exception was never retrieved" after the error; nothing is
    left waiting, so the same command with a writable directory writes the first round."""
    run, rounds = tmp_path / "run", tmp_path / "rounds"
    write_jsonl(run / EVENTS, make_events(3))
    rounds.mkdir()
    read_only(rounds)
    argv = batch_files_generate(run, rounds, "--model", "scripted")
    refused = cuqa_build(*argv, **modes_bind)
    assert_refused(refused, 1,
        f"generate failed: cannot write the round file in {rounds} "
        "(Permission denied): --batch-files needs a directory this command may write")
    rounds.chmod(0o755)
    assert list(rounds.iterdir()) == [] and cuqa_build(*argv).returncode == 75
    assert len(asked_in_rounds(rounds)) == 6


def test_a_checker_reply_in_a_fenced_json_block_is_read_for_its_answer(tmp_path: Path) -> None:
    """Fault 6: a checker that wraps its guesses in ```json {"guesses": [...]}``` gives its
    guesses, not "json": every item whose masked question it guesses fails `connected`."""
    run = tmp_path / "run"

    class FencedChecker(PoolResponder):
        def __call__(self, body: dict[str, Any]) -> Reply:
            prompt = last_user_message(body)
            if body["model"] == "checker" and prompt.startswith("Imagine") \
                    and " a certain " in prompt:
                tag = re.search(r"news item (\w+)", prompt)
                guesses = json.dumps({"guesses": [*self._answers_of(tag[1]), "Atlantis"]})
                return Reply(text=f"```json\n{guesses}\n```")
            return super().__call__(body)

    common = ["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE), "--out",
              str(run), "--limit", "5", "-q", "--model", "scripted", "--max-share", "1"]
    with ScriptedLLM(FencedChecker()) as llm:
        for stage in ("events", "generate"):
            made = cuqa_build(*common, "--stage", stage, "--base-url", llm.base_url)
            assert made.returncode == 0, made.stderr
        (run / "articles.jsonl").unlink()  # no grounding: its verdicts are not tested here
        before = llm.calls
        checked = cuqa_build(*common, "--stage", "validate", "--base-url", llm.base_url,
                             "--check-model", "checker")
        assert checked.returncode in (0, 1), checked.stderr
    items = [i for i in read_jsonl(run / CANDIDATES, Candidate) if i.validation.connected]
    assert items and llm.calls > before
    for item in items:
        [verdict] = [v for v in item.validation.connected if v.check == "connected"]
        assert verdict.reply.startswith('```json\n{"guesses": ') and verdict.guesses
        guessed = any(decided(g, answer_names(item)) for g in verdict.guesses[:3])
        assert verdict.passed is not guessed
        failures = [f for f in item.validation.failures if f.check == "connected"]
        assert bool(failures) is guessed
    assert any(not v.passed for item in items for v in item.validation.connected)


def _generated_with_the_checker(run: Path, llm: ScriptedLLM) -> list[str]:
    """A connected run of the sample's first events, generated (its checks asked while
    composing); the validate command's arguments."""
    common = ["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE), "--out",
              str(run), "--limit", "5", "-q", "--model", "scripted", "--base-url", llm.base_url]
    for stage in ("events", "generate"):
        made = cuqa_build(*common, "--stage", stage)
        assert made.returncode == 0, made.stderr
    (run / "articles.jsonl").unlink()  # no grounding: its verdicts are not tested here
    return [*common, "--stage", "validate"]


def guesses_asked(items: list[Candidate]) -> tuple[int, int]:
    """The guessing requests validate makes for `items`: one per masked question (an event's
    items may share one: asked once) and one per whole question."""
    return len({masked_question(i) for i in items}), len({i.question for i in items})


def test_checks_turned_off_are_said_to_be_off(tmp_path: Path) -> None:
    """Fault 11: `--check-model none` says the four checks were turned off, not that there was
    no generator to default to; nothing is asked."""
    run = tmp_path / "run"
    with ScriptedLLM(PoolResponder()) as llm:
        argv = _generated_with_the_checker(run, llm)
        before = llm.calls
        done = cuqa_build(*argv, "--check-model", "none")
        assert llm.calls == before
    assert done.returncode == 0, done.stderr
    assert "checker: not asked (--check-model none turned its four checks off)" in done.stdout
    assert "no generator" not in done.stdout


@pytest.mark.parametrize("fault", ["HTTP 500", "not JSON"])
def test_a_checker_that_cannot_be_asked_is_said_first_and_fails_the_command(
    tmp_path: Path, fault: str
) -> None:
    """Fault 12: another checker model whose endpoint fails (500s, a body that is no JSON): the
    summary's first line after the count says so, the command exits 1, the verdicts are
    written (each item failing `checker_error`), and a re-run with a working checker asks only
    those calls again."""
    run = tmp_path / "run"
    responder = PoolResponder()
    with ScriptedLLM(responder) as llm:
        argv = [*_generated_with_the_checker(run, llm), "--check-model", "checker",
                "--max-retries", "1"]
        broken = Reply(status=500, text="upstream down") if fault == "HTTP 500" \
            else Reply(raw_body=b"<html>not json</html>")
        llm.responder = lambda body: broken if body["model"] == "checker" else responder(body)
        failed = cuqa_build(*argv)
        llm.responder = responder
        before = llm.calls
        mended = cuqa_build(*argv)
        asked_again = llm.requests[before:]
    assert failed.returncode == 1, failed.stdout + failed.stderr
    items = [i for i in read_jsonl(run / CANDIDATES, Candidate) if i.validation.connected]
    asked = len(items)  # those that passed the format checks
    masked, whole = guesses_asked(items)
    lines = failed.stdout.splitlines()
    summary = next(i for i, line in enumerate(lines) if "candidates passed" in line)
    assert f"the checker checker could not be asked about {asked} candidates" \
        in lines[summary + 1]
    assert "nothing passed, most commonly" not in failed.stdout
    assert failed.stderr.strip().splitlines()[-1] == (  # after the retries' warnings
        f"cuqa-build: error: validate failed: the checker checker could not be asked about {asked} "
        "candidates: run validate again once it answers")
    assert mended.returncode == 0, mended.stderr
    # the checker's three calls an item, once: the masked guesses (one for the masked questions
    # alike), the whole ones and the open book (every item's guesses missed)
    assert asked and {body["model"] for body in asked_again} == {"checker"}
    assert len(asked_again) == masked + whole + asked


def broken(fault: str) -> Responder:
    """An endpoint that is down (HTTP 500), hangs (longer than --timeout 1) or answers garbage."""
    def reply(body: dict[str, Any]) -> Reply:
        if fault == "hanging":
            time.sleep(2)
            return Reply(text="too late")
        return Reply(status=500, text="upstream down") if fault == "HTTP 500" \
            else Reply(raw_body=b"<html>not json</html>")
    return reply


def check_asked(body: dict[str, Any]) -> str | None:
    """Which request of validate's four checks an item's call is ("guess" or "open book"), or
    None for another one (a probe, the judge)."""
    prompt = last_user_message(body)
    if prompt.startswith("Imagine you know everything"):
        return "guess"
    return "open book" if "answer the question below" in prompt else None


class Routed:
    """The scripted endpoint, with one model's calls going to a broken one (and counted)."""

    def __init__(self, model: str, fault: str) -> None:
        self.model, self.broken, self.working = model, broken(fault), PoolResponder()
        self.asked: Counter[str] = Counter()

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.asked[body["model"]] += 1
        return (self.broken if body["model"] == self.model else self.working)(body)


SLOW = ["--max-retries", "0", "--timeout", "1"]


@pytest.mark.parametrize("fault", ["HTTP 500", "hanging", "not JSON"])
def test_a_probe_model_that_cannot_be_asked_is_named_not_the_checker(
    tmp_path: Path, fault: str
) -> None:
    """Issue 31, item 12: the checker answers, the --probe-model (which guesses at the whole
    question) is down, hangs or answers garbage: every message names the probe model and its
    role, none the checker; a re-run with the probe model back asks only what is missing."""
    run = tmp_path / "run"
    endpoint = Routed("probe", fault)
    with ScriptedLLM(endpoint) as llm:
        argv = [*_generated_with_the_checker(run, llm), "--check-model", "checker",
                "--probe-model", "probe", *SLOW]
        endpoint.asked.clear()
        failed = cuqa_build(*argv)
        asked = endpoint.asked.copy()
        items = read_jsonl(run / CANDIDATES, Candidate)
        endpoint.model = "nobody"  # the probe model is back
        before = llm.calls
        mended = cuqa_build(*argv)
        asked_again = llm.requests[before:]
    who = "the probe model probe (a model of the cutoff)"
    assert failed.returncode == 1, failed.stderr
    lines = failed.stdout.splitlines()
    assert lines[1] == (f"  {who} could not be asked about {len(items)} candidates (they fail "
                        "checker_error): run validate again once it answers")
    assert failed.stderr.strip().splitlines()[-1] == (
        f"cuqa-build: error: validate failed: {who} could not be asked about {len(items)} "
        "candidates: run validate again once it answers")
    assert "the checker" not in failed.stdout + failed.stderr
    masked, whole = guesses_asked(items)
    assert asked == {"checker": masked, "probe": whole}  # the checker's guesses, the probe's
    for item in items:
        assert item.validation is not None
        [failure] = item.validation.failures
        assert failure.check == "checker_error"
        assert failure.reason.startswith(f"{who} could not be asked (probe: ")
    assert mended.returncode in (0, 1) and "could not be asked" not in mended.stdout
    # of the four checks, the re-run asks the probe's guesses, then the checker's open book,
    # one for each item (every guess missed)
    again = Counter((body["model"], check) for body in asked_again
                    if (check := check_asked(body)) is not None)
    # (the checker's masked guesses were answered while the probe failed: every call of a
    # check finishes before its failure is raised, so they come from the cache)
    assert again == {("probe", "guess"): whole, ("checker", "open book"): len(items)}


ROLES = {  # the flags, the model that is down, how it is named, the check its items fail
    "checker": (["--check-model", "checker"], "checker", "the checker checker", "checker_error"),
    "probes": (["--check-model", "none", "--probe-model", "probe"], "probe",
               "the probe model probe (a model of the cutoff)", "probe_error"),
    "judge": (["--check-model", "none", "--probe-model", "probe", "--judge-model", "judge"],
              "judge", "the judge judge", "probe_error"),
    "critic": (["--check-model", "none", "--critic-model", "critic"], "critic",
               "the critic critic", "critic_error"),
}


@pytest.mark.parametrize("role", ROLES)
def test_each_model_that_cannot_be_asked_is_named_by_its_role(tmp_path: Path, role: str) -> None:
    """Issue 31, item 12: the checker, the probe model, the probes' judge and the critic, each
    down in turn while the others answer: the summary and the error name that one."""
    flags, model, who, check = ROLES[role]
    run = tmp_path / "run"
    endpoint = Routed(model, "HTTP 500")
    with ScriptedLLM(endpoint) as llm:
        failed = cuqa_build(*_generated_with_the_checker(run, llm), *flags, *SLOW)
    assert failed.returncode == 1, failed.stderr
    items = read_jsonl(run / CANDIDATES, Candidate)  # each passed every check before its own
    assert (f"\n  {who} could not be asked about {len(items)} candidates (they fail {check}): "
            "run validate again once it answers\n") in failed.stdout
    assert failed.stderr.strip().splitlines()[-1] == (
        f"cuqa-build: error: validate failed: {who} could not be asked about {len(items)} "
        "candidates: run validate again once it answers")
    reasons = [f.reason for item in items
               for f in (item.validation.failures if item.validation else []) if f.check == check]
    assert len(reasons) == len(items) and all(
        r.startswith(f"{who} could not be asked ({model}: ") for r in reasons)


def test_a_model_whose_batch_calls_failed_for_good_is_asked_again_with_more_rounds(
    tmp_path: Path
) -> None:
    """Issues 31, items 9 and 12: in --batch-files rounds the probe model's every line fails:
    after --max-retries 1 (two rounds) its items fail, the summary names it and says what asks
    it again (the same command would fail them at once), and a larger --max-retries does."""
    run, rounds = tmp_path / "run", tmp_path / "rounds"
    engine = Routed("probe", "HTTP 500")
    with ScriptedLLM(engine) as llm:
        argv = [*_generated_with_the_checker(run, llm), "--check-model", "checker",
                "--probe-model", "probe", "--batch-files", rounds]
    answered: set[Path] = set()

    def until_done(*flags: str) -> subprocess.CompletedProcess[str]:
        done = cuqa_build(*argv, *flags)
        while done.returncode == 75 and len(answered) < 20:
            for path in set(rounds.glob("round-*.input.jsonl")) - answered:
                answers = answer_batch_file(path.read_text().splitlines(), engine)
                output_of(path).write_text("\n".join(answers) + "\n")
                answered.add(path)
            done = cuqa_build(*argv, *flags)
        return done

    failed = until_done("--max-retries", "1")
    who = "the probe model probe (a model of the cutoff)"
    again = ("run validate again once it answers, with a larger --max-retries (its batch calls "
             "failed in every round the last one allowed)")
    items = read_jsonl(run / CANDIDATES, Candidate)
    assert failed.returncode == 1, failed.stderr
    assert (f"  {who} could not be asked about {len(items)} candidates (they fail "
            f"checker_error): {again}" in failed.stdout.splitlines())
    assert failed.stderr.strip().splitlines()[-1] == (
        f"cuqa-build: error: validate failed: {who} could not be asked about {len(items)} "
        f"candidates: {again}")
    assert all([f.check for f in i.validation.failures] == ["checker_error"] for i in items)
    probe_lines = [line for path in answered for line in path.read_text().splitlines()
                   if json.loads(line)["body"]["model"] == "probe"]
    _, whole = guesses_asked(items)
    assert len(probe_lines) == 2 * whole == engine.asked["probe"]  # two rounds each, paid once
    files = set(rounds.iterdir())
    assert cuqa_build(*argv, "--max-retries", "1").returncode == 1
    assert set(rounds.iterdir()) == files  # failed at once: no round
    engine.model = "nobody"  # the probe model is back
    assert until_done("--max-retries", "2").returncode in (0, 1)
    assert engine.asked["probe"] > 2 * whole


def test_a_probe_model_that_cannot_be_asked_while_composing_is_named(tmp_path: Path) -> None:
    """Issue 31, item 12: the connected recipe asks the probe model while it composes; down,
    it stops the stage, and the error names it and its role."""
    run = tmp_path / "run"
    common = ["--cutoff", "2023-04", "--until", "2023-12-31", "--source", SAMPLE, "--out", run,
              "--limit", "3", "-q", "--model", "scripted", "--probe-model", "probe", *SLOW]
    assert cuqa_build(*common, "--stage", "events").returncode == 0
    with ScriptedLLM(Routed("probe", "HTTP 500")) as llm:
        failed = cuqa_build(*common, "--stage", "generate", "--base-url", llm.base_url)
    assert failed.returncode == 1
    assert failed.stderr.strip().splitlines()[-1] == (
        "cuqa-build: error: generate failed: the probe model probe (a model of the cutoff) "
        "could not be asked while composing about 2 events: run generate again once it answers")
    [failure, *_] = [f for f in read_jsonl(run / GENERATION_FAILURES, GenerationFailure)
                     if f.step == "Check"]
    assert failure.reason == (
        "the probe model probe (a model of the cutoff) could not be asked while composing: "
        "probe: call failed after 1 tries: HTTP 500: upstream down")


def test_another_known_source_is_refused_and_run_json_left_alone(a_copy: Path) -> None:
    """Fault 8: a run generated with `--known-source wiki`, asked for `model`: refused like
    another recipe, before anything is called or written."""
    before = files(a_copy)
    with ScriptedLLM(Endpoint()) as llm:
        argv = [*without(command(a_copy, llm), "--known-source"), "--known-source", "model"]
        refused = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300)
        assert llm.calls == 0
    assert_refused(refused, 2,
        f"{a_copy} was generated with --known-source wiki; --known-source "
        "model would mix two known sources' candidates: use another --out")
    assert files(a_copy) == before


def test_the_estimate_refuses_what_the_command_refuses(a_copy: Path) -> None:
    """Fault 9: `--estimate --prompts connected` on a run of the paper recipe prints the line
    the real command prints, not an estimate."""
    before = files(a_copy)
    with ScriptedLLM(Endpoint()) as llm:
        argv = [*without(command(a_copy, llm), "--prompts"), "--prompts", "connected"]
        real = subprocess.run(argv, env=ENV, capture_output=True, text=True, timeout=300)
        estimate = subprocess.run([*argv, "--estimate"], env=ENV, capture_output=True,
                                  text=True, timeout=300)
        assert llm.calls == 0
    for done in (real, estimate):
        assert_refused(done, 2, f"{a_copy} was generated with --prompts paper; --prompts "
                       "connected would mix two recipes' candidates: use another --out")
    assert estimate.stdout == ""
    assert files(a_copy) == before


def test_an_open_round_of_another_model_is_named_before_a_new_round(tmp_path: Path) -> None:
    """Fault 10: round 1 answered for model A, the next command run with model B: it says that
    round is open for A and how to go on with it; run with A, the round is read."""
    run, rounds = tmp_path / "run", tmp_path / "rounds"
    write_jsonl(run / EVENTS, make_events(3))
    first = cuqa_build(*batch_files_generate(run, rounds, "--model", "model-a"))
    assert first.returncode == 75, first.stderr
    answer_last_round(rounds, AlgorithmResponder())
    switched = cuqa_build(*batch_files_generate(run, rounds, "--model", "model-b"))
    assert switched.returncode == 75
    assert (f"{rounds}/round-001.input.jsonl is an open round of --model model-a (6 requests, "
            "answered in round-001.output.jsonl), which this command (--model model-b) does "
            "not read: it writes a round of its own. To go on with that round instead, run the "
            "command with --model model-a") in switched.stderr
    assert cached_calls(run) == set()
    again = cuqa_build(*batch_files_generate(run, rounds, "--model", "model-a"))
    assert again.returncode == 75 and len(cached_calls(run)) == 6  # round 1 read
    assert "round-001.input.jsonl is an open round" not in again.stderr
    assert "round-002.input.jsonl is an open round of --model model-b (6 requests)" \
        in again.stderr  # now B's round waits, unanswered
    third = [json.loads(line)["body"]["model"] for line in
             (rounds / "round-003.input.jsonl").read_text().splitlines()]
    assert set(third) == {"model-a"}


def test_a_news_line_with_nul_bytes_is_dropped_and_named(tmp_path: Path) -> None:
    """Fault 13: NUL bytes in one news line cost that line (named in a warning), not the whole
    day page."""
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    page = "Portal%3ACurrent_events%2F2023_September_10"
    text = (SAMPLE / f"{page}.wiki").read_text(encoding="utf-8")
    broken = "**The death toll from the earthquake in [[Morocco]] rises"
    assert broken in text
    (snapshot / f"{page}.wiki").write_text(
        text.replace(broken, broken.replace("death toll", "death\0 toll\0\0")), encoding="utf-8")
    sidecar = json.loads((SAMPLE / f"{page}.json").read_text())
    sidecar.pop("sha256", None)  # the page is edited: its old hash would not match
    (snapshot / f"{page}.json").write_text(json.dumps(sidecar))
    done = cuqa_build("--out", tmp_path / "run", "--source", snapshot, "--cutoff", "2023-04",
                      "--until", "2023-12-31", "--stage", "events", "-q")
    assert done.returncode == 0, done.stderr
    assert ("WARNING cuqa_builder.stages.events: Portal:Current events/2023 September 10: line 5 "
            "dropped: it holds NUL characters, which no wikitext has ('**The death toll from "
            "the earthquake in [[Morocco]] rises") in done.stderr
    events = read_jsonl(tmp_path / "run" / EVENTS, Event)
    assert len(events) == 3 and not any("Morocco" in event.text for event in events)
    assert "1 pages read, 0 day pages outside the window, 0 skipped, 1 warnings" in done.stdout


def test_a_read_only_run_answers_the_commands_that_only_read_it(
    a_copy: Path, tmp_path: Path, modes_bind: dict[str, Any]
) -> None:
    """Fault 14: on a read-only run, `--stage release` (written elsewhere) and `--estimate`
    (calibrated on the sound cache, opened read-only) work; a stage that writes says what is
    wrong, in one line."""
    items = [c.to_item() for c in read_jsonl(a_copy / CANDIDATES, Candidate)[:2]]
    write_jsonl(a_copy / "cuqa.jsonl", items)  # as a review would leave them
    read_only(a_copy)
    before = files(a_copy)
    released = cuqa_build("--out", a_copy, "--stage", "release", "--name", "ro", "-q",
                          "--output-root", tmp_path / "releases", **modes_bind)
    assert released.returncode == 0, released.stderr
    assert (tmp_path / "releases" / "ro" / "cuqa.jsonl").read_text() == \
        (a_copy / "cuqa.jsonl").read_text()
    with ScriptedLLM(Endpoint()) as llm:
        argv = command(a_copy, llm)[3:]
        estimated = cuqa_build(*argv, "--stage", "validate", "--estimate", **modes_bind)
        assert estimated.returncode == 0, estimated.stderr
        # the checks were given while composing: validate asks nothing new, and says so once
        # for the model (its probes' answers are in the cache)
        assert estimated.stdout.count("model scripted: 0 calls, 0 min: ") == 1, estimated.stdout
        refused = cuqa_build(*argv, "--stage", "validate", **modes_bind)
        assert llm.calls == 0
    assert_refused(refused, 1,
        f"{a_copy} cannot be written (Permission denied): cuqa-build writes "
        "into the run and keeps its lock there (.cuqa-lock); make the directory writable, or "
        "work on a copy of the run")
    assert files(a_copy) == before


def test_a_directory_where_the_lock_file_belongs_is_named(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / ".cuqa-lock").mkdir(parents=True)
    refused = cuqa_build("--out", run, "--source", SAMPLE, "--cutoff", "2023-04", "--stage",
                         "events", "-q")
    assert_refused(refused, 1,
        f"{run}/.cuqa-lock is a directory, where the run's lock file "
        "belongs: move it aside (nothing in it is the run's)")
    assert sorted(p.name for p in run.iterdir()) == [".cuqa-lock"]
