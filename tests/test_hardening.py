"""Faults a hostile run found (issue 15): nothing lost, nothing silent. Each test failed on the
code before the fix."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.events import Event
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "wiki-sample"
WINDOW = ["--cutoff", "2023-04", "--prompts", "paper", "--until", "2023-12-31"]


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and lines[-1].startswith("cuqa-build: error: "), lines
    return lines[-1].removeprefix("cuqa-build: error: ")


def events_of(run: Path) -> list[Event]:
    return read_jsonl(run / "events.jsonl", Event)


@pytest.fixture
def good_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    assert main(["--out", str(run), *WINDOW, "--source", str(SAMPLE), "--stage", "events",
                 "-q"]) == 0
    return run


# --- data lost or corrupted -----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["empty", "invalid"])
def test_an_empty_or_invalid_snapshot_never_replaces_good_events(
    good_run: Path, tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (good_run / "events.jsonl").read_bytes()
    manifest = (good_run / "manifest.json").read_bytes()
    snapshot = tmp_path / kind
    snapshot.mkdir()
    if kind == "invalid":
        (snapshot / "2023.wiki").write_text("not an events page", encoding="utf-8")
        (snapshot / "2023.json").write_text("{}", encoding="utf-8")
    capsys.readouterr()
    assert main(["--out", str(good_run), "--source", str(snapshot), "--stage", "events",
                 "-q"]) == 1
    assert "nothing written" in error_line(capsys)
    assert (good_run / "events.jsonl").read_bytes() == before
    assert (good_run / "manifest.json").read_bytes() == manifest


def test_a_much_smaller_output_needs_force(
    good_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    total = len(events_of(good_run))
    few = tmp_path / "few"
    few.mkdir()
    for page in ("Portal%3ACurrent_events%2F2023_September_10",):
        for suffix in (".wiki", ".json"):
            shutil.copy(SAMPLE / f"{page}{suffix}", few / f"{page}{suffix}")
    argv = ["--out", str(good_run), "--source", str(few), "--stage", "events", "-q"]
    capsys.readouterr()
    assert main(argv) == 1
    message = error_line(capsys)
    assert f"it holds {total} events" in message and "pass --force" in message
    assert len(events_of(good_run)) == total
    assert main([*argv, "--force"]) == 0
    assert 0 < len(events_of(good_run)) < total / 2


def test_a_new_cutoff_on_a_run_is_refused(
    good_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["--out", str(good_run), "--cutoff", "2023-06", "--prompts", "paper", "--source",
                 str(SAMPLE),
                 "--stage", "events", "-q"]) == 2
    assert error_line(capsys) == (
        f"{good_run} was built for cutoff 2023-04; a run for --cutoff 2023-06 needs another --out"
    )
    assert json.loads((good_run / "run.json").read_text())["cutoff"] == "2023-04"


# --- silent or unclear ----------------------------------------------------------------------


def test_when_every_call_fails_the_reason_is_shown_and_the_exit_is_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(tmp_path / "events.jsonl", make_events(4))
    unauthorized = Reply(text="Incorrect API key provided", status=401)
    with ScriptedLLM(lambda body: unauthorized) as llm:
        code = main(["--out", str(tmp_path), *WINDOW, "--stage", "generate", "-q",
                     "--base-url", llm.base_url, "--model", "m", "--max-retries", "0"])
    assert code == 1
    message = error_line(capsys)
    assert message.startswith("generate failed: no candidate could be made: 4 failed, most "
                              "commonly ")
    assert "(4 of 4 failures)" in message and "401" in message


def test_a_partial_failure_names_the_most_common_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = make_events(3)
    write_jsonl(tmp_path / "events.jsonl", events)
    broken = {events[0].text[:30]: Reply(text="overloaded", status=400)}
    with ScriptedLLM(AlgorithmResponder(broken=broken)) as llm:
        assert main(["--out", str(tmp_path), *WINDOW, "--stage", "generate", "-q",
                     "--base-url", llm.base_url, "--model", "m", "--max-retries", "0"]) == 0
    out = capsys.readouterr().out
    assert "generate: 3 events: 0 already done, 2 gave 2 new candidates (AAB 2, ABC 0), 1 failed" \
        in out
    assert "  most common failure: UnknownQuestionGen: " in out and "(1 of 1 failures)" in out


@pytest.mark.parametrize(("argv", "expected"), [
    (["--cutoff", "0000-01"], "invalid cutoff '0000-01': there is no year 0"),
    (["--cutoff", "2023-04", "--prompts", "paper", "--min-question-words", "9",
     "--max-question-words", "2"],
     "question length bounds 9-2 are empty"),
])
def test_impossible_values_are_one_line(
    argv: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["--out", str(tmp_path / "r"), *argv, "--stage", "validate"])
    except SystemExit as exit_:  # argparse's usage errors exit from inside
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err


def test_negative_word_limits_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--out", "r", "--cutoff", "2023-04", "--prompts", "paper", "--stage", "validate",
              "--min-question-words", "-5", "--max-question-words", "2"])
    assert exit_.value.code == 2
    assert "argument --min-question-words: -5 is below the minimum of 1" in capsys.readouterr().err


def test_an_out_that_is_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "a-file"
    target.write_text("x")
    assert main(["--out", str(target), *WINDOW, "--source", str(SAMPLE), "--stage",
                 "events"]) == 2
    assert error_line(capsys) == f"--out {target} is a file; give a directory for the run"


def test_a_corrupt_run_json_is_one_line_that_says_what_to_do(
    good_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (good_run / "run.json").write_bytes(os.urandom(64))
    capsys.readouterr()
    assert main(["--out", str(good_run), "--source", str(SAMPLE), "--stage", "events"]) == 1
    message = error_line(capsys)
    assert message.startswith(f"{good_run / 'run.json'} is not a run.json written by cuqa-build")
    assert message.endswith("move it aside to start the run afresh")


@pytest.mark.parametrize(("sidecar", "expected"), [
    (b'{"title": "2023", "revid": "x"}',
     "2023.json: invalid sidecar (revid: Input should be a valid integer, unable to parse "
     "string as an integer; timestamp: Field required)"),
    (b'{"title": "2023", "revid": 0, "timestamp": "2023-11-30T12:00:00Z"}',
     "2023.json: invalid sidecar (revid: a revision id is 1 or more, not 0 (hand-written pages "
     "number theirs from 1))"),
    (b'\xff\xfe{"title": "2023"}', "2023.json: invalid sidecar (Invalid JSON"),
])
def test_a_bad_sidecar_names_the_sidecar_and_its_fields(
    tmp_path: Path, sidecar: bytes, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    snapshot = tmp_path / "snap"
    snapshot.mkdir()
    shutil.copy(SAMPLE / "2023.wiki", snapshot / "2023.wiki")
    (snapshot / "2023.json").write_bytes(sidecar)
    assert main(["--out", str(tmp_path / "r"), *WINDOW, "--source", str(snapshot),
                 "--stage", "events", "-q"]) == 1
    assert expected in caplog.text


def test_a_non_utf8_page_is_named_as_such(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    snapshot = tmp_path / "snap"
    shutil.copytree(SAMPLE, snapshot)
    (snapshot / "2023.wiki").write_bytes(b"== Events ==\n\xff\xfe broken")
    meta = json.loads((snapshot / "2023.json").read_text())
    meta.pop("sha256", None)
    (snapshot / "2023.json").write_text(json.dumps(meta))
    assert main(["--out", str(tmp_path / "r"), *WINDOW, "--source", str(snapshot),
                 "--stage", "events", "-q"]) == 0
    assert "2023.wiki: not UTF-8 text (byte 13)" in caplog.text


def test_release_files_follow_the_umask(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    from cuqa_builder.testing.annotate_fixtures import candidate

    write_jsonl(run / "cuqa.jsonl", [candidate(1).to_item()])
    old = os.umask(0o027)
    try:
        assert main(["--out", str(run), "--cutoff", "2023-04", "--prompts", "paper", "--stage",
                     "release",
                     "--name", "shared", "--output-root", str(tmp_path / "out")]) == 0
    finally:
        os.umask(old)
    for path in (tmp_path / "out" / "shared").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o640, path


def test_later_cutoffs_beside_the_runs_own_name_release_subsets(
    good_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The monthly schedule of docs/refresh.md: `--cutoff RUN,LATER` on every stage is allowed."""
    capsys.readouterr()
    assert main(["--out", str(good_run), "--cutoff", "2023-04,2023-10", "--prompts", "paper",
                 "--source", str(SAMPLE),
                 "--stage", "events", "-q"]) == 0
    assert json.loads((good_run / "run.json").read_text())["cutoff"] == "2023-04"
