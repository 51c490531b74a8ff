"""`cuqa-build diff OLD NEW` on a hand-built pair of releases: every count is known in advance."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Event, EventSource
from cuqa_builder.records.items import Review
from cuqa_builder.run import save_run_info
from tests.validation_samples import aab, abc, hard, river


def late() -> Candidate:
    item = aab()
    event = item.event.model_copy(update={"id": "ev-late000000000001", "date": date(2024, 2, 1)})
    return item.model_copy(update={"id": "cq-late000000000001", "event": event})


def make_release(tmp_path: Path, name: str, items: list[Candidate], *extra: str) -> Path:
    run = tmp_path / f"run-{name}"
    run.mkdir()
    every = [aab(), abc(), river(), hard(), late()]
    write_jsonl(run / "candidates.jsonl", items)
    write_jsonl(run / "cuqa.jsonl", [item.to_item() for item in items])
    write_jsonl(run / "events.jsonl", [
        Event(id=c.event.id, date=c.event.date, text=c.event.text,
              source=EventSource(title=c.event.source_title, revid=c.event.revid, url="x"))
        for c in every if c.difficulty == "easy"])
    save_run_info(run, cutoff="2023-04", until="2024-06-30", seed=0)
    root = tmp_path / "output"
    assert main(["--out", str(run), "--stage", "release", "--name", name,
                 "--output-root", str(root), *extra]) == 0
    return root / name


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    old = make_release(tmp_path, "old", [aab(), abc(), river(), hard()],
                       "--release-version", "1.0")
    accepted = abc().model_copy(update={"review": Review(status="accepted", annotators=["a"])})
    new_items = [
        aab(question="Which solar car from Pellham won the Trans-Karoo Challenge in 2023?"),
        accepted,
        hard(answer="Osk River"),
        late(),
    ]
    new = make_release(tmp_path, "new", new_items, "--cutoff", "2023-04,2023-09",
                       "--release-version", "1.1")
    return old, new


EXPECTED_CHANGELOG = """\
# Changes in new 1.1

Compared with **old 1.0** by item id: 4 items before, 4 now.
**1** added, **1** removed, **3** changed.
An item is changed when its question, answer (or aliases), review or anything else differs; \
the `cutoff` label of a subset's copy is not compared.

## By cutoff (each subset against the subset of the same cutoff)

| cutoff | added | removed | changed |
|---|---|---|---|
| 2023-04 | 1 | 1 | 3 |
| 2023-09 | 1 | 0 | 0 |

## By event month

| event | added | removed | changed |
|---|---|---|---|
| 2023-09 | 0 | 0 | 2 |
| 2023-10 | 0 | 1 | 1 |
| 2024-02 | 1 | 0 | 0 |

## By type

| type | added | removed | changed |
|---|---|---|---|
| AAB | 1 | 1 | 1 |
| ABC | 0 | 0 | 2 |

## By difficulty

| difficulty | added | removed | changed |
|---|---|---|---|
| easy | 1 | 1 | 2 |
| hard | 0 | 0 | 1 |

## What changed in the changed items

- question: 1 items
- answer: 1 items
- review: 1 items

## Added

- `cq-late000000000001`

## Removed

- `cq-aab0000000000003`

## Changed

- `cq-aab0000000000001`: question
- `cq-abc0000000000002`: review
- `cqh-0000000000000004`: answer
"""


def test_the_diff_of_a_hand_built_pair_is_exact(pair: tuple[Path, Path], capsys) -> None:
    old, new = pair
    capsys.readouterr()
    assert main(["diff", str(old), str(new)]) == 0
    assert (new / "CHANGELOG.md").read_text(encoding="utf-8") == EXPECTED_CHANGELOG
    assert capsys.readouterr().out.splitlines()[:3] == [
        "diff old 1.0 -> new 1.1: 1 added, 1 removed, 3 changed (question 1, answer 1, "
        "review 1)",
        "  cutoff 2023-04: +1 -1 ~3",
        "  cutoff 2023-09: +1 -0 ~0",
    ]
    changes = json.loads((new / "stats.json").read_text())["changes"]
    assert changes["added"] == ["cq-late000000000001"]
    assert changes["removed"] == ["cq-aab0000000000003"]
    assert changes["by_type"]["ABC"] == {"added": 0, "removed": 0, "changed": 2}
    card = (new / "README.md").read_text(encoding="utf-8")
    assert "## Changes since old 1.0" in card
    assert "1 items added, 1 removed and 3 changed (question 1, answer 1, review 1)" in card
    assert "| 2023-04 | 1 | 1 | 3 |" in card
    assert "Version: **1.1**" in card


def _files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_a_release_compared_with_itself_is_refused_before_anything_is_written(
    pair: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    old, new = pair
    assert main(["diff", str(old), str(new)]) == 0  # new's real changelog and card section
    before = _files(new)
    link = tmp_path / "link-to-new"
    link.symlink_to(new, target_is_directory=True)
    for spelling in (new, new / ".." / new.name, link):
        capsys.readouterr()
        assert main(["diff", str(spelling), str(new)]) == 2  # the arguments are at fault
        assert capsys.readouterr().err == (
            f"cuqa-build diff: error: OLD and NEW are the same release ({new.resolve()}): "
            "give the earlier release as OLD\n")
        assert _files(new) == before


def test_diff_of_a_folder_that_is_no_release_is_one_line(
    pair: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    _, new = pair
    assert main(["diff", str(tmp_path), str(new)]) == 1
    assert capsys.readouterr().err == (
        f"cuqa-build diff: error: {tmp_path} is not a release folder (no stats.json)\n")
    with pytest.raises(SystemExit) as usage:  # NEW missing: argparse's usage error
        main(["diff", str(new)])
    assert usage.value.code == 2
    assert "the following arguments are required: NEW" in capsys.readouterr().err
