"""Evaluation inputs: FreshQA's CSV release, generic question/answers JSONL, CuQA JSONL."""

from __future__ import annotations

import csv
import io
import json
from datetime import date
from pathlib import Path

import pytest

from cuqa_builder.evaluation.datasets import EvalInputError, load_items, source_event_ids
from cuqa_builder.records.items import CuqaItem, EventRef, GeneratorInfo, SubQuestion

FRESHQA_HEADER = [
    "id", "split", "question", "effective_year", "next_review", "false_premise", "num_hops",
    "fact_type", "source", *(f"answer_{i}" for i in range(10)), "note",
]


def freshqa_row(id: str, split: str, question: str, answers: list[str], source: str,
                **fields: str) -> list[str]:
    cells = {
        "id": id, "split": split, "question": question, "effective_year": "2023",
        "next_review": "occasionally", "false_premise": "FALSE", "num_hops": "one-hop",
        "fact_type": "slow-changing", "source": source, "note": "", **fields,
    }
    for i, answer in enumerate(answers):
        cells[f"answer_{i}"] = answer
    return [cells.get(column, "") for column in FRESHQA_HEADER]


def write_freshqa(path: Path, rows: list[list[str]]) -> None:
    """The sheet export's layout: a warning line, a blank line, then the header and rows."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(["Note: this sheet is a snapshot; answers may have changed since."]
                    + [""] * (len(FRESHQA_HEADER) - 1))
    writer.writerow([])
    writer.writerow(FRESHQA_HEADER)
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")


@pytest.fixture
def freshqa(tmp_path: Path) -> Path:
    path = tmp_path / "freshqa.csv"
    write_freshqa(path, [
        freshqa_row("0", "TEST", "Which city hosted the 2023 Summer Special Olympics?",
                    ["Berlin", "Berlin, Germany"],
                    "https://example.org/special-olympics\nhttps://example.org/berlin-2023",
                    num_hops="one-hop", effective_year="2023"),
        freshqa_row("1", "DEV", 'Who wrote the novel "Orbital", winner of the 2024 Booker?',
                    ["Samantha Harvey"], "https://example.org/booker",
                    num_hops="multi-hop", fact_type="never-changing", effective_year="2024",
                    note="answer, with a comma"),
        freshqa_row("2", "TEST", "How many moons does the planet nearest the sun have?",
                    ["0", "zero", "none"], "", false_premise="FALSE",
                    effective_year="before 2022"),
    ])
    return path


def test_freshqa_reads_the_sheet_export(freshqa: Path) -> None:
    items = load_items(freshqa)
    assert [i.id for i in items] == ["freshqa-0", "freshqa-1", "freshqa-2"]
    first = items[0]
    assert first.question == "Which city hosted the 2023 Summer Special Olympics?"
    assert first.answers == ["Berlin", "Berlin, Germany"]  # empty answer_2..9 are unused
    assert first.meta["source"] == [
        "https://example.org/special-olympics", "https://example.org/berlin-2023",
    ]
    assert first.meta["split"] == "TEST"
    assert first.meta["effective_year"] == "2023"
    assert first.meta["num_hops"] == "one-hop"
    assert items[1].question == 'Who wrote the novel "Orbital", winner of the 2024 Booker?'
    assert items[1].meta["note"] == "answer, with a comma"
    assert items[1].meta["num_hops"] == "multi-hop"
    assert items[2].answers == ["0", "zero", "none"]
    assert items[2].meta["source"] == []


def test_freshqa_split_and_limit(freshqa: Path) -> None:
    assert [i.id for i in load_items(freshqa, split="test")] == ["freshqa-0", "freshqa-2"]
    assert [i.id for i in load_items(freshqa, split="dev")] == ["freshqa-1"]
    assert [i.id for i in load_items(freshqa, split="test", limit=1)] == ["freshqa-0"]


def test_freshqa_bad_row_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.csv"
    row = freshqa_row("0", "TEST", "Q?", ["A"], "")
    write_freshqa(path, [row, row[:5]])
    with pytest.raises(EvalInputError, match=r"broken\.csv:5: 5 cells, the header has 20"):
        load_items(path)


def test_freshqa_without_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    path.write_text("question,answer\nQ?,A\n", encoding="utf-8")
    with pytest.raises(EvalInputError, match="no FreshQA header row"):
        load_items(path)


def test_split_is_only_for_freshqa(tmp_path: Path) -> None:
    path = tmp_path / "generic.jsonl"
    path.write_text('{"question": "Q?", "answers": "A"}\n', encoding="utf-8")
    with pytest.raises(EvalInputError, match="--split applies to FreshQA"):
        load_items(path, split="test")


def test_generic_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "generic.jsonl"
    lines = [
        {"id": "q1", "question": "Where is the Louvre?", "answers": "Paris"},
        {"question": "Name a Beatle.", "answers": ["John Lennon", "Paul McCartney", " "],
         "source": "handmade"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n", encoding="utf-8")
    first, second = load_items(path)
    assert (first.id, first.answers) == ("q1", ["Paris"])
    assert second.id == "line-2"
    assert second.answers == ["John Lennon", "Paul McCartney"]
    assert second.meta == {"source": "handmade"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"question": "Q?", "answers": 3}', r"data\.jsonl:2: `answers` must be a string"),
        ('{"question": "", "answers": "A"}', r"data\.jsonl:2: `question` must be"),
        ('{"q": "Q?"}', r"data\.jsonl:2: expected a CuQA item"),
        ('["Q?", "A"]', r"data\.jsonl:2: expected a JSON object"),
        ('{"question": "Q?", "answers": "A"', r"data\.jsonl:2: "),
        ('{"id": "x", "question": "Q?", "answer": "A"}', r"data\.jsonl:2: .*type"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "Fine?", "answers": "yes"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(EvalInputError, match=message):
        load_items(path)


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    line = json.dumps({"id": "same", "question": "Q?", "answers": "A"})
    path.write_text(f"{line}\n{line}\n", encoding="utf-8")
    with pytest.raises(EvalInputError, match="id 'same' occurs twice"):
        load_items(path)


def cuqa_item(id: str, answer: str, aliases: list[str], type: str = "ABC",
              difficulty: str = "easy") -> CuqaItem:
    return CuqaItem(
        id=id,
        question=f"Question {id}?",
        answer=answer,
        answer_aliases=aliases,
        type=type,
        difficulty=difficulty,
        sub_questions=[
            SubQuestion(question=f"Unknown part of {id}?", answer="Bridge", kind="unknown"),
            SubQuestion(question=f"Known part of {id}?", answer=answer, kind="known"),
        ],
        event=EventRef(id=f"ev-{id}", date=date(2023, 11, 1), text="Something happened.",
                       source_title="2023", revid=7),
        cutoff="2023-04",
        generator=GeneratorInfo(model="m"),
    )


def test_cuqa_jsonl_merges_answer_and_aliases(tmp_path: Path) -> None:
    path = tmp_path / "cuqa.jsonl"
    released = cuqa_item("c1", "United Kingdom", ["UK", "Britain", "UK"])
    # A candidate line carries intermediates and validation: the loader keeps what it needs.
    candidate = cuqa_item("c2", "Lionel Messi", [], type="AAB", difficulty="hard").model_dump(
        mode="json") | {"seed": 3, "validation": {"passed": True}, "intermediates": None}
    # A hard candidate merges two easy items, each made from its own event.
    candidate["sub_items"] = [{"event": {"id": "ev-a"}}, {"event": {"id": "ev-c2"}}]
    path.write_text(released.model_dump_json() + "\n" + json.dumps(candidate) + "\n",
                    encoding="utf-8")
    first, second = load_items(path)
    assert first.answers == ["United Kingdom", "UK", "Britain"]
    assert (first.type, first.difficulty) == ("ABC", "easy")
    assert [s.kind for s in first.sub_questions] == ["unknown", "known"]
    assert first.meta == {"cutoff": "2023-04", "event_id": "ev-c1", "event_ids": ["ev-c1"]}
    assert (second.id, second.answers, second.type, second.difficulty) == (
        "c2", ["Lionel Messi"], "AAB", "hard")
    assert second.meta["event_ids"] == ["ev-c2", "ev-a"]
    assert source_event_ids(second) == {"ev-c2", "ev-a"}


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(EvalInputError, match="no dataset at"):
        load_items(tmp_path / "nope.jsonl")
