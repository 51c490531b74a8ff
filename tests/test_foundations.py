"""The shared pieces every stage stands on: the window, crash-safe JSONL, prompts, snapshots."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.jsonio import JsonlAppender, JsonlError, iter_jsonl, numbered_jsonl, read_jsonl
from cuqa_builder.prompts import PromptError, load_prompt
from cuqa_builder.records.events import Link
from cuqa_builder.records.pages import Page, PageMeta
from cuqa_builder.snapshot import (
    SnapshotError,
    iter_snapshot,
    page_filename,
    page_kind,
    write_page,
)
from cuqa_builder.window import Window, WindowError


def test_month_cutoff_means_end_of_month() -> None:
    window = Window.parse("2023-04", "2023-12-31")
    assert window.cutoff == date(2023, 4, 30)
    assert not window.contains(date(2023, 4, 30))
    assert window.contains(date(2023, 5, 1))
    assert window.contains(date(2023, 12, 31))
    assert not window.contains(date(2024, 1, 1))


def test_day_cutoff_is_day_precise() -> None:
    window = Window.parse("2023-04-15", "2023-05")
    assert not window.contains(date(2023, 4, 15))
    assert window.contains(date(2023, 4, 16))
    assert window.until == date(2023, 5, 31)


def test_leap_year_month_end() -> None:
    assert Window.parse("2024-02", "2024-03").cutoff == date(2024, 2, 29)


@pytest.mark.parametrize(
    ("cutoff", "until", "message"),
    [
        ("2023-13", None, "month must be 01-12"),
        ("April 2023", None, "expected YYYY-MM"),
        ("2023-02-30", None, "day is out of range"),
        ("2023-04", "2023-03-01", "empty window"),
        ("2023-04", "soon", "invalid --until"),
    ],
)
def test_invalid_windows_are_explained(cutoff: str, until: str | None, message: str) -> None:
    with pytest.raises(WindowError, match=message):
        Window.parse(cutoff, until)


def test_cli_invalid_cutoff_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["--cutoff", "2023-13", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "invalid cutoff '2023-13'" in err


def test_cli_new_run_needs_a_cutoff(tmp_path: Path, capsys) -> None:
    assert main(["--out", str(tmp_path / "run"), "--stage", "events"]) == 2
    assert "--cutoff is required" in capsys.readouterr().err


def test_appender_survives_a_truncated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "links.jsonl"
    with JsonlAppender(path) as out:
        out.append(Link(title="Paris", text="Paris"))
    with path.open("a") as fh:  # what a kill in the middle of a write leaves behind
        fh.write('{"title": "Lyo')
    assert [r.title for r in read_jsonl(path, Link)] == ["Paris"]
    with JsonlAppender(path) as out:
        out.append(Link(title="Lyon", text="Lyon"))
    assert [r.title for r in read_jsonl(path, Link)] == ["Paris", "Lyon"]


def test_a_bad_line_is_one_clear_error_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "links.jsonl"
    path.write_text('{"title": "Paris", "text": "Paris"}\n{"title": "Lyon"}\n{"title": 3\n')
    with pytest.raises(JsonlError) as caught:
        read_jsonl(path, Link)
    assert str(caught.value) == f"{path}:2: not a valid Link record (text: Field required)"
    path.write_text('{"title": "Paris", "text": "Paris"}\nnot json\n')
    with pytest.raises(JsonlError, match=rf"^{re.escape(str(path))}:2: not a valid Link record "
                                         r"\(Invalid JSON: [^\n]*\)$"):
        read_jsonl(path, Link)


def test_chosen_lines_are_read_and_the_others_skipped_unparsed(tmp_path: Path) -> None:
    path = tmp_path / "links.jsonl"
    path.write_text('{"title": "Paris", "text": "Paris"}\nnot json\n\n'
                    '{"title": "Lyon", "text": "Lyon"}\n')
    assert [(n, r.title) for n, r in numbered_jsonl(path, Link, lines={1, 4})] == [
        (1, "Paris"), (4, "Lyon")]
    assert [r.title for r in iter_jsonl(path, Link, lines={4})] == ["Lyon"]
    with pytest.raises(JsonlError, match=":2: not a valid Link record"):
        read_jsonl(path, Link)


def test_prompt_placeholders_are_checked(tmp_path: Path) -> None:
    with pytest.raises(PromptError, match="no prompt template"):
        load_prompt("does_not_exist")
    with pytest.raises(PromptError, match=r"prompt 'merge_questions' has placeholders "
                       r"\['known_question', 'unknown_question'\], expected \['question'\]"):
        load_prompt("merge_questions", expects=frozenset({"question"}))
    merge = load_prompt("merge_questions", expects=frozenset({"unknown_question",
                                                              "known_question"}))
    assert merge.text.startswith("Question One: {unknown_question}")  # front matter stripped
    assert "Table 9" in merge.source
    with pytest.raises(PromptError, match=r"needs \['known_question'\]"):
        merge.render(unknown_question="Who?")


def test_snapshot_round_trip_and_errors(tmp_path: Path) -> None:
    title = "Portal:Current events/2023 September 10"
    assert page_kind(title) == "portal"
    assert page_kind("2023") == "year"
    assert page_kind("Paris") is None
    assert page_filename(title) == "Portal%3ACurrent_events%2F2023_September_10"
    page = Page(meta=PageMeta(title=title, revid=7, timestamp="2023-09-11T00:00:00Z"), wikitext="x")
    write_page(tmp_path, page)
    (tmp_path / "Broken.wiki").write_text("no sidecar")
    found = list(iter_snapshot(tmp_path))
    pages = [p for p in found if isinstance(p, Page)]
    errors = [e for e in found if isinstance(e, SnapshotError)]
    assert [p.meta.title for p in pages] == [title]
    assert pages[0].meta.sha256 is not None
    assert "Broken.wiki: no sidecar" in str(errors[0])


@pytest.mark.parametrize("flag", ["--limit", "--hard"])
def test_counts_cannot_be_negative(flag: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--cutoff", "2023-04", "--out", str(tmp_path), flag, "-1"])
    assert exit_.value.code == 2
    assert f"argument {flag}: -1 is below the minimum of 0" in capsys.readouterr().err
