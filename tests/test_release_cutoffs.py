"""Many cutoffs from one run: one subset per cutoff in one release folder, each a config of the
card that `datasets.load_dataset(path, "cutoff-...")` loads; versions; stale items held back."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

import cuqa_builder
from cuqa_builder.cli.build import main
from cuqa_builder.dataset import DatasetError
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Event, EventSource
from cuqa_builder.records.items import CuqaItem
from cuqa_builder.run import save_run_info
from tests.validation_samples import aab, abc, hard, river

NAME = "cuqa-living"
CUTOFFS = "2023-12,2023-04,2023-09"  # any order; sorted by date


def late() -> Candidate:
    item = aab()
    event = item.event.model_copy(update={"id": "ev-late000000000001", "date": date(2024, 2, 1)})
    return item.model_copy(update={"id": "cq-late000000000001", "event": event})


def candidates() -> list[Candidate]:
    return [aab(), abc(), river(), hard(), late()]


def event_of(ref) -> Event:
    return Event(id=ref.id, date=ref.date, text=ref.text,
                 source=EventSource(title=ref.source_title, revid=ref.revid, url="about:blank"))


@pytest.fixture
def run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    write_jsonl(out / "candidates.jsonl", candidates())
    write_jsonl(out / "cuqa.jsonl", [c.to_item() for c in candidates()])
    write_jsonl(out / "events.jsonl", [event_of(c.event) for c in candidates()
                                       if c.difficulty == "easy"])
    save_run_info(out, cutoff="2023-04", until="2024-06-30", seed=0)
    return out


def release(run: Path, root: Path, *extra: str) -> int:
    return main(["--out", str(run), "--stage", "release", "--name", NAME,
                 "--output-root", str(root), *extra])


def ids(items: list[CuqaItem]) -> list[str]:
    return [item.id for item in items]


def test_one_subset_per_cutoff_holds_the_items_whose_events_all_follow_it(
    run: Path, tmp_path: Path, capsys
) -> None:
    assert release(run, tmp_path / "out", "--cutoff", CUTOFFS, "--release-version", "2.1") == 0
    folder = tmp_path / "out" / NAME
    assert sorted(p.name for p in folder.iterdir()) == [
        "README.md", "cutoff-2023-04", "cutoff-2023-09", "cutoff-2023-12", "schema.json",
        "stats.json"]
    everything = cuqa_builder.load(folder, cutoff="2023-04")
    assert ids(everything) == ids(candidates())
    # The hard item's own event is in October, but its first easy item's is in September.
    later = cuqa_builder.load(folder, cutoff="2023-09")
    assert ids(later) == [river().id, late().id]
    assert {item.cutoff for item in later} == {"2023-09"}
    assert ids(cuqa_builder.load(folder, cutoff="2023-12")) == [late().id]
    with pytest.raises(DatasetError, match="one of 2023-04, 2023-09, 2023-12"):
        cuqa_builder.load(folder)

    stats = json.loads((folder / "stats.json").read_text())
    assert stats["version"] == "2.1" and stats["items"] == 5
    assert [(s["config"], s["path"], s["items"], s["window"]["first_unknown_day"])
            for s in stats["subsets"]] == [
        ("cutoff-2023-04", "cutoff-2023-04/cuqa.jsonl", 5, "2023-05-01"),
        ("cutoff-2023-09", "cutoff-2023-09/cuqa.jsonl", 2, "2023-10-01"),
        ("cutoff-2023-12", "cutoff-2023-12/cuqa.jsonl", 1, "2024-01-01"),
    ]
    card = (folder / "README.md").read_text()
    for expected in (
        "| `cutoff-2023-09` | 2023-09 | 2023-10-01 to 2024-06-30 | 2 | 2 | 0 | 2 | 0 |",
        "| `cutoff-2023-04` | 2023-04 | 2023-05-01 to 2024-06-30 | 5 | 3 | 2 | 4 | 1 |",
        "Version: **2.1**",
        'datasets.load_dataset(str(folder), "cutoff-2023-12", split="test")',
        "`cuqa-build --cutoff 2023-04,2023-09,2023-12`",
    ):
        assert expected in card, expected
    summary = capsys.readouterr().out
    assert "release 2.1: 5 items" in summary and "cutoff-2023-12: 1 items" in summary


def test_each_subset_loads_with_datasets_by_its_config_name(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets = pytest.importorskip("datasets")
    yaml = pytest.importorskip("yaml")
    assert release(run, tmp_path / "out", "--cutoff", CUTOFFS) == 0
    folder = str(tmp_path / "out" / NAME)
    header = yaml.safe_load((Path(folder) / "README.md").read_text().split("---\n")[1])
    assert header["configs"][0] == {
        "config_name": "cutoff-2023-04", "default": True,
        "data_files": [{"split": "test", "path": "cutoff-2023-04/cuqa.jsonl"}]}
    cache = str(tmp_path / "hf-cache")
    for config, expected in (("cutoff-2023-04", candidates()), ("cutoff-2023-09",
                                                                [river(), late()]),
                             ("cutoff-2023-12", [late()])):
        subset = datasets.load_dataset(folder, config, split="test", cache_dir=cache)
        assert subset["id"] == [c.id for c in expected], config
        assert set(subset["cutoff"]) == {config.removeprefix("cutoff-")}
    default = datasets.load_dataset(folder, split="test", cache_dir=cache)
    assert default.num_rows == 5


def test_a_cutoff_earlier_than_the_runs_is_refused(run: Path, tmp_path: Path, capsys) -> None:
    assert release(run, tmp_path / "out", "--cutoff", "2023-01,2023-09") == 2
    assert capsys.readouterr().err == (
        "cuqa-build: error: cutoff 2023-01 is earlier than this run's cutoff 2023-04: the run "
        "holds no events up to 2023-04 and its known hops may need knowledge up to it; build "
        "another run (--out) for an earlier cutoff\n")
    assert not (tmp_path / "out").exists()
    assert release(run, tmp_path / "out", "--cutoff", "2023-09,2024-07") == 2
    assert "empty window: --until 2024-06-30 is not after the cutoff 2024-07-31" in \
        capsys.readouterr().err


def test_one_later_cutoff_is_a_plain_release_and_the_folder_is_tidied(
    run: Path, tmp_path: Path
) -> None:
    root = tmp_path / "out"
    assert release(run, root, "--cutoff", CUTOFFS) == 0
    assert release(run, root, "--cutoff", "2023-09") == 0
    folder = root / NAME
    assert not any(folder.glob("cutoff-*"))
    assert ids(cuqa_builder.load(folder)) == [river().id, late().id]
    stats = json.loads((folder / "stats.json").read_text())
    assert stats["subsets"] == [] and stats["window"]["cutoff"] == "2023-09"
    assert stats["version"] == date.today().isoformat()
    assert json.loads((run / "run.json").read_text())["cutoff"] == "2023-04"  # the run's own


def test_items_whose_event_was_reworded_are_held_back(run: Path, tmp_path: Path, capsys) -> None:
    events = read_jsonl(run / "events.jsonl", Event)
    events[2] = events[2].model_copy(update={"text": "The River Osk flooded Dunmere twice."})
    write_jsonl(run / "events.jsonl", events)
    assert release(run, tmp_path / "out") == 0
    released = ids(cuqa_builder.load(tmp_path / "out" / NAME))
    assert released == [aab().id, abc().id, late().id]  # river and the hard item built on it
    stats = json.loads((tmp_path / "out" / NAME / "stats.json").read_text())
    assert stats["stale_held_back"] == 2
    assert "2 items held back: their event was reworded or removed" in capsys.readouterr().out
    assert "2 reviewed items were held back" in (tmp_path / "out" / NAME / "README.md").read_text()
