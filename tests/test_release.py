"""The release folder: it loads with `json`, `datasets` and our loader; the schema fits the data."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import cuqa_builder
from cuqa_builder.cli.build import main
from cuqa_builder.dataset import DatasetError
from cuqa_builder.jsonio import atomic_write_json, write_jsonl
from cuqa_builder.records.candidates import CheckFailure, Validation
from cuqa_builder.records.events import Event, EventSource
from cuqa_builder.records.items import CuqaItem, Review
from cuqa_builder.review_report import ReviewReport
from cuqa_builder.run import CheckCount, Manifest, ValidationInfo, save_run_info
from cuqa_builder.snapshot import snapshot_sha256
from cuqa_builder.validation.limits import Limits
from tests.validation_samples import aab, abc, hard

NAME = "cuqa-test-2023-04"
ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "wiki-sample"


def reviewed_items() -> list[CuqaItem]:
    """What the annotation pull step leaves in the run: accepted items with their review."""
    review = Review(status="accepted", annotators=["ann1", "ann2"], agreement=1.0,
                    rewritten=True, seconds=41.5)
    return [c.to_item().model_copy(update={"review": review}) for c in (aab(), abc(), hard())]


def event_of(item: CuqaItem, category: str | None) -> Event:
    ref = item.event
    return Event(id=ref.id, date=ref.date, text=ref.text, category=category,
                 source=EventSource(title=ref.source_title, revid=ref.revid, url="about:blank"))


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run directory after validation and review: items, events, manifest, review report."""
    out = tmp_path / "run"
    out.mkdir()
    items = reviewed_items()
    write_jsonl(out / "cuqa.jsonl", items)
    write_jsonl(out / "events.jsonl", [event_of(items[0], "Sports"), event_of(items[1], None),
                                       event_of(items[2], "Disasters and accidents")])
    atomic_write_json(out / "manifest.json", {
        "api": "http://127.0.0.1:9/w/api.php", "fetched": "2024-07-01T00:00:00Z",
        "pages": {item.event.source_title: item.event.revid for item in items},
    })
    report = ReviewReport(
        tasks=4, reviewed=4, pending=0, accepted=3, rejected=1, ties=0, accept_rate=0.75,
        rewritten=3, answers_corrected=0, reject_reasons={"not unknown": 1}, annotations=9,
        cancelled=1, votes=8, annotators=2, multi_annotated=4, mean_agreement=0.875,
        seconds_per_task=41.5,
    )
    atomic_write_json(out / "review-report.json", report.model_dump(mode="json"))
    save_run_info(out, seed=0)  # as generation records it with its first candidate
    return out


def release(run: Path, root: Path, *extra: str) -> int:
    return main(["--out", str(run), "--cutoff", "2023-04", "--until", "2024-06",
                 "--stage", "release", "--output-root", str(root), *extra])


@pytest.fixture
def folder(run: Path, tmp_path: Path) -> Path:
    assert release(run, tmp_path / "output", "--name", NAME) == 0
    return tmp_path / "output" / NAME


def test_release_writes_the_five_files(folder: Path, run: Path) -> None:
    assert sorted(p.name for p in folder.iterdir()) == [
        "README.md", "cuqa.jsonl", "manifest.json", "schema.json", "stats.json"
    ]
    released = json.loads((folder / "manifest.json").read_text())
    assert released == {**json.loads((run / "manifest.json").read_text()),
                        "snapshot": None, "snapshot_sha256": None}


def test_released_lines_load_with_json_and_keep_their_review(folder: Path) -> None:
    lines = (folder / "cuqa.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["id"] for r in rows] == [i.id for i in reviewed_items()]
    assert rows[0]["review"] == {"status": "accepted", "annotators": ["ann1", "ann2"],
                                 "agreement": 1.0, "rewritten": True, "seconds": 41.5}
    assert rows[2]["difficulty"] == "hard" and len(rows[2]["sub_questions"]) == 4
    assert not any(key in rows[2] for key in ("intermediates", "sub_items", "validation"))


def test_the_schema_validates_every_line_and_rejects_a_broken_one(folder: Path) -> None:
    schema = json.loads((folder / "schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    rows = [json.loads(line) for line in (folder / "cuqa.jsonl").read_text().splitlines()]
    for row in rows:
        validator.validate(row)
    broken = {**rows[0], "type": "XYZ"}
    del broken["answer"]
    messages = sorted(e.message for e in validator.iter_errors(broken))
    assert messages == ["'XYZ' is not one of ['AAB', 'ABC']", "'answer' is a required property"]


def test_our_loader_returns_typed_items_from_the_folder_or_the_file(folder: Path) -> None:
    items = cuqa_builder.load(folder)
    assert items == reviewed_items()
    assert cuqa_builder.load(str(folder / "cuqa.jsonl")) == items
    assert isinstance(items[0], CuqaItem) and items[0].review.seconds == 41.5


def test_stats_hold_the_cards_figures(folder: Path) -> None:
    stats = json.loads((folder / "stats.json").read_text())
    assert stats["items"] == 3 and stats["name"] == NAME
    assert stats["window"] == {"cutoff": "2023-04", "known_until": "2023-04-30",
                               "first_unknown_day": "2023-05-01", "until": "2024-06-30"}
    assert stats["by_type"] == {"AAB": 1, "ABC": 2}
    assert stats["by_difficulty"] == {"easy": 2, "hard": 1}
    assert stats["by_month"] == {"2023-09": 2, "2023-10": 1}
    assert stats["by_category"] == {"(none)": 1, "Disasters and accidents": 1, "Sports": 1}
    assert stats["by_review_status"] == {"accepted": 3}
    assert stats["generator_models"] == ["scripted-generator"]
    assert stats["prompts"] == {"merge_questions": ["b" * 64], "unknown_question_gen": ["a" * 64]}
    assert stats["seed"] == 0
    assert stats["review"]["accept_rate"] == 0.75
    assert stats["source_pages"] == {
        "Portal:Current events/2023 October 2": 1003,
        "Portal:Current events/2023 September 10": 1001,
        "Portal:Current events/2023 September 11": 1002,
    }


def card_parts(folder: Path) -> tuple[str, str]:
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    header, _, body = text[4:].partition("\n---\n")
    return header, body


def test_the_card_header_is_yaml_the_hub_understands(folder: Path) -> None:
    yaml = pytest.importorskip("yaml")
    header = yaml.safe_load(card_parts(folder)[0])
    assert header["license"] == "cc-by-sa-4.0"
    assert header["task_categories"] == ["question-answering"]
    assert header["language"] == ["en"]
    assert header["size_categories"] == ["n<1K"]
    assert header["configs"] == [
        {"config_name": "default", "data_files": [{"split": "test", "path": "cuqa.jsonl"}]}
    ]


def test_the_card_body_tells_what_how_and_under_which_licence(folder: Path) -> None:
    body = card_parts(folder)[1]
    for expected in (
        "# CuQA: cuqa-test-2023-04",
        "Knowledge cutoff: **2023-04**",
        "dated **2023-05-01** to **2024-06-30**",
        "Items: **3**",
        "| ABC | 2 | 67% |",
        "| 2023-10 | 1 | 33% |",
        "| Disasters and accidents | 1 | 33% |",
        "Generator model(s): `scripted-generator`",
        f"| `merge_questions` | `{'b' * 16}` |",
        "Random seed: 0",
        "Events come from 3 Wikipedia pages (year articles and Current events pages), at these "
        "revisions:",
        "[Portal:Current events/2023 October 2](http://127.0.0.1:9/w/index.php?title="
        "Portal:Current_events/2023_October_2&oldid=1003)",
        "with every intermediate step kept, by Algorithm 1 of the Self-DC paper, with the "
        "prompts of its Tables 5-9 (`--prompts paper`).",
        "`cuqa-build --revisions manifest.json`",
        "| accept rate | 75% |",
        "| agreement (multi-annotated tasks) | 0.88 over 4 |",
        "Reject reasons: not unknown (1).",
        "CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/). The event texts are "
        "adapted from Wikipedia articles by Wikipedia contributors",
        "arXiv:2402.13514",
        "@software{cuqa_builder,",
    ):
        assert expected in body, expected


def test_the_release_loads_with_datasets(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets = pytest.importorskip("datasets")
    by_card = datasets.load_dataset(str(folder), split="test", cache_dir=str(tmp_path / "hf"))
    assert by_card.num_rows == 3 and by_card[2]["difficulty"] == "hard"


def card_code(body: str) -> str:
    """The card's Python block, as written."""
    (code,) = re.findall(r"```python\n(.*?)```", body, flags=re.S)
    return code


@pytest.mark.parametrize("where", ["the release folder", "elsewhere"])
def test_the_card_s_snippet_runs_as_written(folder: Path, tmp_path: Path, where: str) -> None:
    """Issue 32.10: the card's `load_dataset("json", data_files=...)` gave a `train` split
    while its header declares `test`; issue 40: `load_dataset(".")` raises a ValueError. The
    card's whole block runs as written in the release folder, and elsewhere with `folder` set
    to the release's path, as the card says."""
    pytest.importorskip("datasets")
    header, body = card_parts(folder)
    assert "split: test" in header
    code = card_code(body)
    cwd = folder
    if where == "elsewhere":
        assert 'folder = Path(".").resolve()' in code
        code = code.replace('Path(".").resolve()', f"Path({str(folder)!r})")
        cwd = tmp_path
    script = code + "\nprint(sorted(cuqa.info.splits), cuqa.split, cuqa.num_rows, len(items))"
    environment = {**os.environ, "HF_HUB_OFFLINE": "1",
                   "HF_DATASETS_CACHE": str(tmp_path / "hf"), "HF_HOME": str(tmp_path / "hf"),
                   "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['test']", "test", "3", "3"]


# --- an unreviewed, offline run; errors -----------------------------------------------------


def test_an_offline_unreviewed_run_says_so(run: Path, tmp_path: Path) -> None:
    root = tmp_path / "output"
    assert release(run, root, "--name", NAME) == 0
    (run / "manifest.json").unlink()
    (run / "review-report.json").unlink()
    write_jsonl(run / "cuqa.jsonl", [aab().to_item()])

    assert release(run, root, "--name", NAME) == 0

    folder = root / NAME
    assert not (folder / "manifest.json").exists()  # the earlier release's is gone too
    body = card_parts(folder)[1]
    assert body.startswith("\n# CuQA: cuqa-test-2023-04\n\n> **Not reviewed.** No person has "
                           "reviewed these 1 items")
    assert "No human review report was found" in body
    assert "(not reviewed by a person); the dataset is shared" in body
    assert "The run left no page manifest" in body
    assert cuqa_builder.load(folder)[0].review.status == "unreviewed"


def test_the_summary_and_the_card_say_whether_anyone_reviewed_the_items(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32.8: an unreviewed release said "3 items (0 accepted by review)"."""
    root = tmp_path / "output"
    reviewed = reviewed_items()
    cases = [
        (reviewed, "3 items, all accepted by review ->", None),
        ([make().to_item() for make in (aab, abc, hard)],
         "3 items, none reviewed: released as unreviewed ->",
         "> **Not reviewed.** No person has reviewed these 3 items: they are released as the "
         "automatic checks left them (`review.status` is `unreviewed` on every line)."),
        ([*reviewed[:2], hard().to_item()], "3 items, 2 accepted by review, 1 unreviewed ->",
         "> **Partly reviewed.** 1 of the 3 items were not reviewed by a person"),
    ]
    for items, said, notice in cases:
        write_jsonl(run / "cuqa.jsonl", items)
        assert release(run, root, "--name", NAME) == 0
        assert said in capsys.readouterr().out
        top = card_parts(root / NAME)[1].split("CuQA (Compositional", 1)[0]
        assert (notice in top) if notice else ("reviewed" not in top), top


def test_the_card_counts_released_items_that_failed_a_check(run: Path, tmp_path: Path) -> None:
    failed = Validation(passed=False, failures=[
        CheckFailure(check="probe_not_unknown", reason="the target model answered it")])
    write_jsonl(run / "candidates.jsonl", [
        aab(validation=Validation(passed=True)), abc(validation=failed),
        hard(validation=Validation(passed=True)),
    ])
    assert release(run, tmp_path / "output", "--name", NAME) == 0
    folder = tmp_path / "output" / NAME
    assert json.loads((folder / "stats.json").read_text())["failed_automatic_checks"] == 1
    assert "1 released items failed a check and are kept because reviewers accepted " \
        "them" in card_parts(folder)[1]

    write_jsonl(run / "candidates.jsonl",
                [make(validation=Validation(passed=True)) for make in (aab, abc, hard)])
    assert release(run, tmp_path / "output", "--name", NAME) == 0
    body = card_parts(folder)[1]
    assert "No probe model was used.\nEvery released item passed every check.\n" in body

    save_run_info(run, validation=ValidationInfo(limits=Limits(), probe_model="target-m",
                                                 prompts={"probe_closed_book": "c" * 64}))
    assert release(run, tmp_path / "output", "--name", NAME) == 0
    assert "Every released item passed every check and probe." in card_parts(folder)[1]


def test_a_card_from_a_snapshot_links_no_revision_and_says_what_it_was_built_by(
    run: Path, tmp_path: Path
) -> None:
    """A snapshot's revision ids are unchecked (the example's are 1, 2, ...): listed, never
    linked; the manifest names no wiki and no fetch; the connected recipe is named as such."""
    item = abc().to_item()
    connected = item.model_copy(update={"generator": item.generator.model_copy(
        update={"recipe": "connected"})})
    write_jsonl(run / "cuqa.jsonl", [connected])
    # as the events stage wrote a run's manifest before it recorded the snapshot's hash
    manifest = Manifest(api=None, fetched=None, snapshot=str(SAMPLE),
                        pages={connected.event.source_title: 1})
    atomic_write_json(run / "manifest.json", manifest.model_dump())
    assert release(run, tmp_path / "output", "--name", NAME) == 0
    body = card_parts(tmp_path / "output" / NAME)[1]
    assert ("Events come from 1 page of the local snapshot `wiki-sample` (content sha256 "
            f"`{snapshot_sha256(SAMPLE)}`; year articles and Current events pages in "
            "Wikipedia's format); its revision ids are not checked against Wikipedia, so none "
            "is linked:\n\n"
            f"- {connected.event.source_title} (revision {connected.event.revid})\n") in body
    assert "oldid" not in body and "Algorithm 1 of the Self-DC paper, with the prompts" not in body
    assert "--revisions" not in body  # its ids are no Wikipedia revisions to fetch
    assert "by cuqa-builder's connected recipe (`--prompts connected`), which departs from " \
           "Algorithm 1" in body
    # the shipped snapshots are written in the project's words: not "adapted from Wikipedia"
    assert "adapted from Wikipedia" not in body
    assert "the snapshots shipped in cuqa-builder's `examples/` are written in the project's " \
           "own words, not copied from Wikipedia" in body


def test_the_check_table_says_what_per_event_and_max_share_require(
    run: Path, tmp_path: Path
) -> None:
    """Issue 40: the selection's two checks were explained by their names only."""
    save_run_info(run, validation=ValidationInfo(limits=Limits(), counts={
        "per_event": CheckCount(passed=4, failed=2), "max_share": CheckCount(passed=3, failed=1)}))
    assert release(run, tmp_path / "output", "--name", NAME) == 0
    body = card_parts(tmp_path / "output" / NAME)[1]
    rows = {row.split(" | ")[0]: row for row in body.splitlines() if row.startswith("| `")}
    assert rows["| `per_event`"] == (
        "| `per_event` | among the first --per-event (default 2) of its event's items that "
        "passed, ranked best first, each of another bridge and property: the run keeps a few "
        "items an event, not every variant of one | 4 | 2 |")
    assert "its property (birthplace, capital...) is not over --max-share (default 40%)" \
        in rows["| `max_share`"]


def test_a_snapshot_run_s_manifest_names_no_wiki_and_no_fetch(tmp_path: Path) -> None:
    """The run's manifest keeps where its snapshot is; the released copy names it by its
    directory and content hash, so no path of this machine leaves it (issue 32.9)."""
    out = tmp_path / "run"
    assert main(["--out", str(out), "--cutoff", "2023-04", "--until", "2023-12-31",
                 "--source", str(SAMPLE), "--stage", "events", "-q"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["api"] is None and manifest["fetched"] is None
    assert manifest["snapshot"] == str(SAMPLE) and manifest["pages"]["2023"] == 1
    assert manifest["snapshot_sha256"] == snapshot_sha256(SAMPLE)

    write_jsonl(out / "cuqa.jsonl", [aab().to_item()])
    assert release(out, tmp_path / "output", "--name", NAME) == 0
    folder = tmp_path / "output" / NAME
    released = json.loads((folder / "manifest.json").read_text())
    assert (released["snapshot"], released["snapshot_sha256"]) == (
        "wiki-sample", snapshot_sha256(SAMPLE))
    assert released["pages"] == manifest["pages"]
    for path in folder.iterdir():
        text = path.read_text(encoding="utf-8")
        assert str(SAMPLE.parent) not in text and str(tmp_path) not in text, path.name
    assert "local snapshot `wiki-sample` (content sha256 `" in card_parts(folder)[1]


def test_validate_then_release_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    write_jsonl(out / "candidates.jsonl", [aab(), abc(), hard()])
    args = ["--out", str(out), "--cutoff", "2023-04", "--output-root", str(tmp_path / "o")]
    assert main([*args, "--stage", "validate", "-q"]) == 0
    assert main([*args, "--stage", "release", "--name", "e2e"]) == 0
    assert [i.id for i in cuqa_builder.load(tmp_path / "o" / "e2e")] == [
        aab().id, abc().id, hard().id
    ]
    stats = json.loads((tmp_path / "o" / "e2e" / "stats.json").read_text())
    assert stats["validation"]["limits"]["max_question_words"] == 60
    assert stats["composed"] == {"by_model": 1, "from_structure": 2,
                                 "models": ["scripted-generator"]}
    card = (tmp_path / "o" / "e2e" / "README.md").read_text()
    # Every check validate ran, with its counts over the candidates (issue 32.9).
    for row in ("| `one_question` | one question ending in `?` | 3 | 0 |",
                "| `question_length` | 4-60 words (at most 15 characters a word on average) | 3 "
                "| 0 |",
                "| `short_answer` | a non-empty answer of at most 10 words | 3 | 0 |",
                "| `bridge_in_question` | in ABC items the bridge entity absent from the question "
                "| 2 | 0 |",
                "| `near_duplicate` | no near-duplicates (the same event and answer, or a reworded "
                "question) | 3 | 0 |"):
        assert row in card, row
    assert "`connected`" not in card  # no checker ran: none is claimed
    # How the items were composed: the hard item's merge is a generation call, the easy
    # items record none.
    assert "- Written by a language model: **1** items, by `scripted-generator`" in card
    assert "- Composed from structure: **2** items, with no generation call" in card
    assert "The questions were composed from those texts, 1 by a language model and 2 by rule"\
        in card


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ((), "the release stage needs --name NAME"),
        (("--name", "../escape"), "--name: '../escape': use letters"),
    ],
)
def test_release_needs_a_plain_name(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...],
    message: str,
) -> None:
    """A usage error, exit 2, as docs/troubleshooting.md promises for a flag that cannot work."""
    with pytest.raises(SystemExit) if extra else contextlib.nullcontext():
        assert release(run, tmp_path / "output", *extra) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "output").exists()


def test_nothing_to_release(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run / "cuqa.jsonl").write_text("")
    assert release(run, tmp_path / "output", "--name", NAME) == 1
    assert "holds no items: nothing to release" in capsys.readouterr().err


def test_items_of_another_cutoff_are_refused(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(run / "cuqa.jsonl", [aab(cutoff="2023-06").to_item()])
    assert release(run, tmp_path / "output", "--name", NAME) == 1
    assert "items with cutoff 2023-06 in a run whose cutoff is 2023-04" in capsys.readouterr().err


def test_the_loader_names_the_file_line_and_problem(tmp_path: Path) -> None:
    good = aab().to_item().model_dump_json()
    path = tmp_path / "cuqa.jsonl"
    path.write_text(f"{good}\n\n{good[:-1]}\n")
    with pytest.raises(DatasetError, match=rf"^{path}:3: not JSON \(.* at column \d+\)$"):
        cuqa_builder.load(path)
    missing = json.loads(good)
    del missing["question"]
    path.write_text(f"{good}\n{json.dumps(missing)}\n")
    with pytest.raises(DatasetError, match=rf"^{path}:2: question: Field required$"):
        cuqa_builder.load(path)
    wrong = {**json.loads(good), "type": "XYZ", "difficulty": "medium"}
    path.write_text(json.dumps(wrong) + "\n")
    with pytest.raises(DatasetError, match=r":1: type: Input should be 'AAB' or 'ABC' \(and 1 "):
        cuqa_builder.load(path)
    with pytest.raises(FileNotFoundError, match="no CuQA dataset at"):
        cuqa_builder.load(tmp_path / "nowhere")
