"""All four commands answer alike through the one CLI shell: a bad flag is a usage error (exit 2),
a missing input or a failed step is one line `PROG: error: ...` (exit 1), Ctrl-C is exit 130 with
how to resume, and `-v` adds the traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cuqa_builder.cli import annotate, build, evaluate, models
from cuqa_builder.cli.shell import INTERRUPTED
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.run import RunContext
from cuqa_builder.stages.options import BuildOptions
from cuqa_builder.stages.registry import STAGES, MissingInputError, producer_of, run_stage
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.openai_server import ScriptedLLM
from cuqa_builder.window import Window

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


def one_error_line(capsys: pytest.CaptureFixture[str], prog: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"{prog}: error: "), err
    return err[0]


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
        "cuqa-build": ["--out", str(tmp_path / "r"), "--cutoff", "2023-04", "--stage", "fetch",
                       "--sources", "blogs"],
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
        argv = ["--out", str(tmp_path / "r"), "--cutoff", "2023-04", "--stage", "release"]
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


def test_a_real_ctrl_c_stops_a_run_that_resumes(tmp_path: Path) -> None:
    """SIGINT to a real `cuqa-build` in the middle of its LLM calls: exit 130, the resume hint,
    and the same command then finishes."""
    out = tmp_path / "run"
    out.mkdir()
    write_jsonl(out / "events.jsonl", make_events(6))
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-shell-0000"}
    with ScriptedLLM(AlgorithmResponder(delay_s=0.5)) as llm:
        argv = [sys.executable, "-m", "cuqa_builder.cli.build", "--out", str(out),
                "--cutoff", "2023-04", "--until", "2024-06", "--stage", "generate", "-q",
                "--base-url", llm.base_url, "--model", "scripted", "--concurrency", "1"]
        process = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120  # a loaded machine loads spaCy and openai slowly
        while not llm.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert llm.requests, "the run never called the model"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=180)
        assert process.returncode == INTERRUPTED, err
        assert "cuqa-build: interrupted; run the same command to resume" in err
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
