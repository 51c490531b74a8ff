"""All four commands answer alike through the one CLI shell: a bad flag is a usage error (exit 2),
a missing input or a failed step is one line `PROG: error: ...` (exit 1), Ctrl-C is exit 130 with
how to resume, and `-v` adds the traceback."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tomllib

from cuqa_builder.cli import INTERRUPTED, annotate, build, diff, evaluate, models
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.run import RunContext
from cuqa_builder.stages.options import BuildOptions
from cuqa_builder.stages.registry import STAGES, MissingInputError, producer_of, run_stage
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM
from cuqa_builder.window import Window
from tests.conftest import artifacts_folder, ctrl_c_reaches_children
from tests.test_events_stage import many_days

ROOT = Path(__file__).resolve().parents[1]
Main = Callable[[list[str]], int]
CLIS: dict[str, Main] = {
    "cuqa-build": build.main, "cuqa-eval": evaluate.main,
    "cuqa-annotate": annotate.main, "cuqa-models": models.main,
}


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUQA_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-shell-0000")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def the_error_line(stderr: str, prog: str) -> str:
    """The one line a failed command printed (of a process, or of capsys)."""
    err = stderr.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"{prog}: error: "), err
    return err[0]


def one_error_line(capsys: pytest.CaptureFixture[str], prog: str) -> str:
    return the_error_line(capsys.readouterr().err, prog)


BAD_FLAGS = {
    "cuqa-build": ["--out", "run", "--concurrency", "0"],
    "cuqa-eval": ["run", "--data", "d.jsonl", "--method", "direct", "--out", "o",
                  "--max-retries", "-1"],
    "cuqa-annotate": ["push", "--no-such-flag"],
    "cuqa-models": ["pull", "no-such-model"],
}


@pytest.mark.parametrize("prog", CLIS)
def test_a_bad_flag_is_a_usage_error(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        CLIS[prog](BAD_FLAGS[prog])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: {prog}") and "error: " in err.splitlines()[-1]
    assert err.splitlines()[-1].startswith(prog)


# A flag of each command (and subcommand) shortened by its last letters, which argparse's
# default would take as the flag (issue 32: `--cutof 2023-04` ran as `--cutoff`): the command
# reporting it, with the flag it is nearest to (issue 40).
ABBREVIATED = {
    "cuqa-build": (build.main, ["--out", "run", "--cutof", "2023-04"], "--cutof", "--cutoff"),
    "cuqa-build diff": (build.main, ["diff", "a", "b", "--verb"], "--verb", "--verbose"),
    "cuqa-eval run": (evaluate.main, ["run", "--data", "d.jsonl", "--method", "direct",
                                      "--out", "o", "--estim"], "--estim", "--estimate"),
    "cuqa-eval index": (evaluate.main, ["index", "--out", "i", "--even", "e.jsonl"],
                        "--even", "--events"),
    "cuqa-annotate export": (annotate.main, ["export", "--run", "r", "--annot", "2"],
                             "--annot", "--annotators"),
    "cuqa-models pull": (models.main, ["pull", "smollm2-135m-instruct-q4_1", "--forc"],
                         "--forc", "--force"),
}


@pytest.mark.parametrize("command", ABBREVIATED)
def test_a_flag_is_taken_only_as_spelled_in_full(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    main, argv, unrecognized, meant = ABBREVIATED[command]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    # a subcommand's unknown flag is reported by its command; `diff` has a parser of its own
    prog = command if command == "cuqa-build diff" else command.split()[0]
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == (
        f"{prog}: error: unrecognized argument: {unrecognized} (did you mean {meant}?)")
    assert not list(tmp_path.iterdir())  # nothing ran


@pytest.mark.parametrize(("prog", "argv", "meant"), [
    ("cuqa-build", ["--cutof", "2023-04"], "--cutoff"),
    ("cuqa-eval", ["run", "--dat", "d.jsonl"], "--data"),
    ("cuqa-eval", ["run", "--data", "d.jsonl", "--method", "direct", "--out", "o",
                   "--no-such-flag"], None),
])
def test_a_misspelt_flag_is_named_before_a_missing_one(
    prog: str, argv: list[str], meant: str | None, tmp_path: Path
) -> None:
    """Through the installed command, as a user meets it: the misspelt flag, with the nearest
    one if any, not `--out is required` (which the misspelling may cause)."""
    done = subprocess.run([*console_script(prog), *argv], capture_output=True, text=True,
                          cwd=tmp_path, check=False)
    assert done.returncode == 2
    hint = f" (did you mean {meant}?)" if meant else ""
    assert done.stderr.splitlines()[-1] == (
        f"{prog}: error: unrecognized argument: {argv[-1 if meant is None else -2]}{hint}")
    assert not list(tmp_path.iterdir())


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _parsers(sub)


@pytest.mark.parametrize("module", [build, diff, evaluate, annotate, models],
                         ids=lambda module: module.__name__.rsplit(".", 1)[-1])
def test_no_parser_takes_abbreviations(module: Any) -> None:
    parsers = list(_parsers(module.build_parser()))
    assert parsers and all(not parser.allow_abbrev for parser in parsers)

def test_the_usage_line_names_diff(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build.main(["--help"])
    usage = capsys.readouterr().out.split("\n\n", 1)[0]
    assert usage.startswith("usage: cuqa-build [-h]")
    assert usage.splitlines()[-1] == "       cuqa-build diff OLD NEW"


def test_test_artifacts_go_to_the_user_s_own_cache(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.delenv("CUQA_TEST_ARTIFACTS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert artifacts_folder() == tmp_path / "home" / ".cache" / "cuqa-builder" / "test-artifacts"
    monkeypatch.setenv("CUQA_TEST_ARTIFACTS", str(tmp_path / "shots"))
    assert artifacts_folder() == tmp_path / "shots"


def missing_inputs(tmp_path: Path) -> dict[str, list[str]]:
    gone = tmp_path / "absent"
    return {
        "cuqa-build": ["--out", str(tmp_path / "run"), "--cutoff", "2023-04", "--stage",
                       "generate", "-q"],
        "cuqa-eval": ["run", "--data", str(gone / "cuqa.jsonl"), "--method", "direct",
                      "--out", str(tmp_path / "eval"), "-q"],
        "cuqa-annotate": ["import", str(gone / "export.json"), "--run", str(tmp_path)],
        "cuqa-models": ["pull", "smollm2-135m-instruct-q4_1", "--file", str(gone / "m.gguf")],
    }


@pytest.mark.parametrize("prog", CLIS)
def test_a_missing_input_is_one_line_and_exit_1(
    prog: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert CLIS[prog](missing_inputs(tmp_path)[prog]) == 1
    line = one_error_line(capsys, prog)
    assert "absent" in line or "events.jsonl is missing: run the events stage first" in line


@pytest.mark.parametrize(("argv", "code", "message"), [
    # the missing input is named before a new run's missing --cutoff
    (["--stage", "validate"], 1, "{out}/candidates.jsonl is missing: run the generate stage "
     "first"),
    (["--stage", "release", "--cutoff", "2023-04", "--name", "r"], 1,
     "{out}/cuqa.jsonl is missing: run the validate stage first"),
    (["--cutoff", "2023-04", "--source", "{gone}"], 1, "snapshot directory {gone} does not "
     "exist"),
    (["--stage", "release", "--cutoff", "2023-04"], 2,
     "the release stage needs --name NAME (it writes OUTPUT_ROOT/NAME/)"),
    (["--stage", "release", "--cutoff", "2023-04", "--name", "../escape"], 2,
     "argument --name: '../escape': use letters, digits, '.', '_' and '-' only"),
])
def test_a_refused_command_names_the_problem_and_leaves_no_run_behind(
    argv: list[str], code: int, message: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Nothing written: no run.json, no lock file, not even the new directory."""
    out, gone = tmp_path / "new-run", tmp_path / "no-snapshot"
    argv = [arg.format(gone=gone) for arg in argv]
    try:
        status = build.main(["--out", str(out), *argv, "-q"])
    except SystemExit as exit_:  # argparse's usage errors exit from inside
        status = exit_.code
    assert status == code
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"cuqa-build: error: {message.format(out=out, gone=gone)}"
    assert not out.exists()


def test_every_stage_input_names_the_stage_that_makes_it(tmp_path: Path) -> None:
    ctx = RunContext(out=tmp_path, window=Window.parse("2023-04"), options=BuildOptions())
    for stage in STAGES:
        for name in stage.reads:
            with pytest.raises(MissingInputError) as missing:
                run_stage(stage, ctx)
            maker = producer_of(name)
            assert str(missing.value) == (
                f"{tmp_path / name} is missing: run the {maker.name} stage first"
            )
            assert STAGES.index(maker) < STAGES.index(stage)


def test_a_failed_step_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = {
        "cuqa-build": ["--out", str(tmp_path / "r"), "--cutoff", "2023-04", "--stage", "events",
                       "--source", str(tmp_path)],  # a snapshot without pages
        "cuqa-eval": ["report", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "r.md")],
        "cuqa-annotate": ["push", "--run", str(tmp_path), "--url", "http://127.0.0.1:9"],
        "cuqa-models": ["path", "smollm2-135m-instruct-q4_1"],
    }
    for prog, argv in failing.items():
        assert CLIS[prog](argv) == 1, prog
        one_error_line(capsys, prog)


def interrupt(*_: object) -> None:
    raise KeyboardInterrupt


async def interrupt_async(*_: object) -> str:
    raise KeyboardInterrupt


@pytest.mark.parametrize("prog", CLIS)
def test_ctrl_c_is_exit_130_with_how_to_resume(
    prog: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Each command interrupted where it does its work.
    if prog == "cuqa-build":
        monkeypatch.setattr(build, "run_stage", interrupt)
        argv = ["--out", str(tmp_path / "r"), "--cutoff", "2023-04", "--stage", "fetch"]
    elif prog == "cuqa-eval":
        monkeypatch.setitem(evaluate.COMMANDS, "report", interrupt_async)
        argv = ["report", str(tmp_path), "--out", str(tmp_path / "r.md")]
    elif prog == "cuqa-annotate":
        monkeypatch.setitem(annotate.COMMANDS, "export", interrupt)
        argv = ["export", "--run", str(tmp_path)]
    else:
        monkeypatch.setattr(models, "_list", interrupt)
        argv = ["list"]
    assert CLIS[prog](argv) == INTERRUPTED
    assert capsys.readouterr().err == f"\n{prog}: interrupted; run the same command to resume\n"


def test_verbose_adds_the_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--out", str(tmp_path / "r"), "--cutoff", "2023-04", "--stage", "generate"]
    assert build.main([*argv, "-q"]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert build.main([*argv, "-q", "-v"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.strip().splitlines()[-1].startswith("cuqa-build: error: ")


EVENTS, CALLS = 4, 16  # Algorithm 1 asks four calls per event of the scripted model
RESUME_LINE = "cuqa-build: interrupted; run the same command to resume"


def console_script(name: str) -> list[str]:
    """The command line of an installed console script: what pip's wrapper runs, taken from
    pyproject.toml so that the test follows the entry point the package declares."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts[name].split(":")
    return [sys.executable, "-c", f"import sys; from {module} import {function}; "
            f"sys.exit({function}())"]


def test_a_child_a_test_interrupts_takes_ctrl_c_when_this_process_ignores_it() -> None:
    """As under `nohup bash scripts/test.sh &`, where the test process starts with SIGINT
    ignored: the child started for a test's Ctrl-C still takes it (issue 40, item 2)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with ctrl_c_reaches_children():
            child = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                                      "print(flush=True)\ntime.sleep(60)"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert child.stdout is not None and child.stdout.readline()  # past its start-up
        child.send_signal(signal.SIGINT)
        # ended by it (an uncaught KeyboardInterrupt exits by the signal), not 60 s later
        assert child.wait(timeout=30) == -signal.SIGINT
    finally:
        child.kill()
        child.wait()


STARTED: list[subprocess.Popen[str]] = []


def start(argv: list[str], **popen: Any) -> subprocess.Popen[str]:
    """A command in its own process group (so that the test's Ctrl-C reaches it as a
    terminal's would: the command and the processes it starts), stopped after the test."""
    with ctrl_c_reaches_children():
        process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True, **popen)
    STARTED.append(process)
    return process


@pytest.fixture(autouse=True)
def stop_what_is_left() -> Iterator[None]:
    yield
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:  # a test that failed: the group is stopped, with its workers
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def ctrl_c(process: subprocess.Popen[Any]) -> None:
    """What a terminal's Ctrl-C does: SIGINT to the whole process group."""
    os.killpg(process.pid, signal.SIGINT)


@pytest.fixture
def cpu_load() -> Iterator[None]:
    """Another CPU-heavy process on the machine, as on a shared CI box (it stops by itself)."""
    burner = subprocess.Popen([sys.executable, "-c", "import time\nend = time.monotonic() + 600\n"
                               "while time.monotonic() < end: pass"])
    yield
    burner.kill()
    burner.wait()


class HeldResponder(AlgorithmResponder):
    """Algorithm 1's scripted model, holding the `hold`-th request (from 1) until `release`
    is set: the test then knows a call is in flight without guessing how long anything takes."""

    def __init__(self, hold: int | None) -> None:
        super().__init__()
        self.hold = hold
        self.count = 0
        self.lock = threading.Lock()
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.count += 1
            number = self.count
        if number == self.hold:
            self.held.set()
            self.release.wait(timeout=300)
        return super().__call__(body)


def full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is already full: a child writing its stdout there blocks until the
    test reads, so its last write (the summary) is still under way when the signal comes."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    with contextlib.suppress(BlockingIOError):
        while True:  # writes of 4 KiB into a pipe are whole or refused
            os.write(write, b"x" * 4096)
    os.set_blocking(write, True)
    return read, write


def writing_to_a_full_pipe(process: subprocess.Popen[str]) -> bool:
    """Whether the process waits in a write to a pipe (Linux names where a process sleeps)."""
    assert process.poll() is None, "the run ended before its last write"
    return "pipe_write" in Path(f"/proc/{process.pid}/wchan").read_text()


def drain(fd: int) -> None:
    with os.fdopen(fd, "rb") as pipe:
        pipe.read()


def start_generate(out: Path, llm: ScriptedLLM, *, stdout: int | None = None,
                   python_flags: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    command = console_script("cuqa-build")
    argv = [command[0], *python_flags, *command[1:], "--out", str(out), "--cutoff", "2023-04",
            "--until", "2024-06", "--stage", "generate", "-q", "--base-url", llm.base_url,
            "--model", "scripted", "--concurrency", "1", "--prompts", "paper"]
    # Buffered output as a user's: with PYTHONUNBUFFERED the summary is written at once, never
    # at exit, where a Ctrl-C used to end in "Exception ignored ... KeyboardInterrupt".
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-shell-0000"}
    env.pop("PYTHONUNBUFFERED", None)
    return start(argv, env=env, stdout=stdout)


def bodies(requests: list[dict[str, Any]]) -> set[str]:
    return {json.dumps(body, sort_keys=True) for body in requests}


# Where a Ctrl-C lands, as the number of the request held meanwhile (None: every call is
# answered and the command is writing its summary into a full pipe).
POINTS = {"before the first answer": 1, "mid-calls": CALLS // 2, "at the last call": CALLS,
          "during the last write": None}


@pytest.mark.parametrize("point", POINTS)
def test_a_real_ctrl_c_stops_a_run_that_resumes(
    point: str, tmp_path: Path, cpu_load: None
) -> None:
    """Ctrl-C to a real `cuqa-build` on a busy machine, at each point of a run: exit 130 with
    the resume hint, and the same command then finishes paying only what was not answered."""
    out = tmp_path / "run"
    out.mkdir()
    write_jsonl(out / "events.jsonl", make_events(EVENTS))
    hold = POINTS[point]
    responder = HeldResponder(hold)
    with ScriptedLLM(responder) as llm:
        read, write = full_pipe()
        process = start_generate(out, llm, stdout=write)
        os.close(write)
        try:
            if hold is not None:
                assert responder.held.wait(timeout=300), "the run never reached that call"
            else:
                while not writing_to_a_full_pipe(process):
                    time.sleep(0.02)
            ctrl_c(process)
        finally:
            responder.release.set()
            drain(read)
        _, err = process.communicate(timeout=180)
        assert process.returncode == INTERRUPTED, err
        assert err.strip().splitlines()[-1] == RESUME_LINE, err
        assert "Traceback" not in err, err
        # the held call was in flight: the interrupted command kept its answer (issue 38.7)
        answered = llm.requests[: CALLS if hold is None else hold]
        first_run = len(llm.requests)
        resumed = start_generate(out, llm)
        _, err = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, err
        again = llm.requests[first_run:]
    assert not bodies(answered) & bodies(again), "the resume paid an answered call again"
    assert len(answered) + len(again) == CALLS
    assert len(read_jsonl(out / "candidates.jsonl", Candidate)) == EVENTS


def test_nothing_but_the_entry_point_loads_before_ctrl_c_is_answered() -> None:
    """Issue 26, fault 15: what a console script imports before its entry point can answer
    Ctrl-C is a window in which Ctrl-C prints a traceback; it used to import `typing` (and 35
    more modules: ~10 ms, tens on a busy machine). In a bare interpreter (`-S`: no site
    packages to load anything first) importing the entry point loads the package's own three
    small modules and nothing else."""
    probe = ("import sys; before = set(sys.modules); import cuqa_builder.cli.entry; "
             "print(sorted(set(sys.modules) - before))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-S", "-c", probe], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.strip() == str(["cuqa_builder", "cuqa_builder.cli",
                                       "cuqa_builder.cli.entry"])


# From the earliest point the entry point controls to the slowest imports.
@pytest.mark.parametrize("module", ["cuqa_builder.cli.entry", "pydantic",
                                    "cuqa_builder.cli.shell"])
def test_ctrl_c_while_the_command_imports_is_exit_130(
    module: str, tmp_path: Path, cpu_load: None
) -> None:
    """Ctrl-C while the console script still imports its libraries answers as later: one line,
    exit 130, no traceback. `-X importtime` says when `module` is loaded (the signal lands
    then or later: while the rest loads, or at the first call, held)."""
    (tmp_path / "run").mkdir()
    write_jsonl(tmp_path / "run" / "events.jsonl", make_events(1))
    responder = HeldResponder(hold=1)
    with ScriptedLLM(responder) as llm:
        process = start_generate(tmp_path / "run", llm, python_flags=("-X", "importtime"))
        assert process.stderr is not None
        try:
            for line in process.stderr:
                if line.split("|")[-1].strip() == module:
                    ctrl_c(process)
                    break
        finally:
            responder.release.set()
        _, err = process.communicate(timeout=180)
    assert process.returncode == INTERRUPTED, err
    assert err.strip().splitlines()[-1] == RESUME_LINE, err
    assert "Traceback" not in err, err


def ner_workers(process: subprocess.Popen[str]) -> list[str]:
    """The processes `process` has started (Linux lists a thread's children)."""
    assert process.poll() is None, "the events stage ended before its NER workers started"
    return Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()


def test_ctrl_c_while_ner_workers_run_is_one_line(tmp_path: Path, cpu_load: None) -> None:
    """A terminal's Ctrl-C reaches the NER worker processes too: the parent answers it, the
    workers print no traceback of their own."""
    argv = [*console_script("cuqa-build"), "--out", str(tmp_path / "run"), "--cutoff", "2023-12",
            "--until", "2024-12-31", "--stage", "events", "--source",
            str(many_days(tmp_path, 300)), "-q"]
    process = start(argv)
    while not ner_workers(process):
        time.sleep(0.02)
    ctrl_c(process)
    _, err = process.communicate(timeout=180)
    assert process.returncode == INTERRUPTED, err
    assert err.strip().splitlines()[-1] == RESUME_LINE, err
    assert "Traceback" not in err, err
