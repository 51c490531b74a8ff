"""Evaluation inputs -> `EvalItem`s: CuQA JSONL, FreshQA's CSV release, generic JSONL.

The format is recognised from the file: `.csv` is FreshQA; a JSON line with `answer` is a CuQA
item (released or candidate), one with `answers` is generic. A bad line is reported with the
file and the line number.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from cuqa_builder.errors import CuqaError
from cuqa_builder.records.items import CuqaItem, SubQuestion

FRESHQA_ANSWER_COLUMNS = tuple(f"answer_{i}" for i in range(10))
FRESHQA_META_COLUMNS = (
    "split", "effective_year", "next_review", "false_premise", "num_hops", "fact_type",
    "source", "note",
)
FRESHQA_SPLITS = ("test", "dev")


class EvalInputError(CuqaError, ValueError):
    """An evaluation input file that cannot be read as questions with answers."""


class GoldQuestion(BaseModel):
    """A question with every acceptable answer (aliases included), as items and predictions
    carry it."""

    id: str
    question: str
    answers: list[str]
    type: str | None = None
    difficulty: str | None = None


class EvalItem(GoldQuestion):
    """One question of any input format, with what the evaluation may need besides."""

    sub_questions: list[SubQuestion] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)


def load_items(
    path: Path, split: str | None = None, limit: int | None = None, *, aliases: bool = True
) -> list[EvalItem]:
    """Every item of the file (FreshQA: of `split` when given), the first `limit` when given;
    a CuQA item's answer_aliases count as answers unless `aliases` is False."""
    if not path.is_file():
        raise EvalInputError(f"no dataset at {path}")
    if path.suffix.lower() == ".csv":
        items = list(read_freshqa(path, split))
    elif split is not None:
        raise EvalInputError(f"--split applies to FreshQA CSV files, not to {path.name}")
    else:
        items = list(read_jsonl_items(path, aliases))
    if not items:
        which = f" of split {split!r}" if split is not None else ""
        raise EvalInputError(f"{path}: no questions{which} in the file: nothing to evaluate "
                             "(a score over no items would read as a result)")
    _check_unique_ids(path, items)
    return items[:limit] if limit is not None else items


def _check_unique_ids(path: Path, items: list[EvalItem]) -> None:
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise EvalInputError(f"{path}: id {item.id!r} occurs twice")
        seen.add(item.id)


# --- JSONL: CuQA items or generic {question, answers} ------------------------------------


def read_jsonl_items(path: Path, aliases: bool = True) -> Iterator[EvalItem]:
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise EvalInputError("expected a JSON object")
                yield _item_from_record(record, number, aliases)
            except (ValueError, ValidationError) as exc:
                raise EvalInputError(f"{path}:{number}: {_describe(exc)}") from None


def _item_from_record(record: dict[str, Any], number: int, aliases: bool) -> EvalItem:
    if "answer" in record:
        return _cuqa_item(record, aliases)
    if "answers" in record:
        return _generic_item(record, number)
    raise EvalInputError("expected a CuQA item (`answer`) or a generic item (`answers`)")


def _cuqa_item(record: dict[str, Any], aliases: bool) -> EvalItem:
    # Candidates carry extra keys (intermediates, validation...): keep only the released fields.
    item = CuqaItem.model_validate({k: v for k, v in record.items() if k in CuqaItem.model_fields})
    return EvalItem(
        id=item.id,
        question=item.question,
        answers=_unique([item.answer, *(item.answer_aliases if aliases else [])]),
        type=item.type,
        difficulty=item.difficulty,
        sub_questions=item.sub_questions,
        meta={"cutoff": item.cutoff, "event_id": item.event.id,
              "event_ids": _event_ids(record)},
    )


def freshqa_groups(item: EvalItem) -> tuple[str | None, str | None]:
    """A FreshQA item's effective year ("before 2022" read as "before-2022", as Table 11 names
    it) and its hops ("one-hop", "multi-hop"); None for other items."""
    year = str(item.meta.get("effective_year") or "").strip().lower()
    hops = str(item.meta.get("num_hops") or "").strip().lower()
    return ("-".join(year.split()) or None), (hops or None)


def _event_ids(record: dict[str, Any]) -> list[str]:
    """The item's event and, for a hard candidate, the events of the items it merges."""
    found = [str(record["event"]["id"])] if isinstance(record.get("event"), dict) else []
    for sub in record.get("sub_items") or []:
        if isinstance(sub, dict):
            found += _event_ids(sub)
    return list(dict.fromkeys(found))


def source_event_ids(item: EvalItem) -> frozenset[str]:
    """The events a question was made from (CuQA `event.id`; a generic item's `event_id` or
    `event_ids`), whose passages `--exclude-source-event` keeps from the retriever."""
    ids = item.meta.get("event_ids") or []
    if isinstance(ids, str):
        ids = [ids]
    single = item.meta.get("event_id")
    return frozenset(str(i) for i in [*ids, *([single] if single else [])])


def _generic_item(record: dict[str, Any], number: int) -> EvalItem:
    answers = record["answers"]
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise EvalInputError("`answers` must be a string or a list of strings")
    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        raise EvalInputError("`question` must be a non-empty string")
    known = {"id", "question", "answers", "type", "difficulty"}
    return EvalItem(
        id=str(record.get("id", f"line-{number}")),
        question=question.strip(),
        answers=_unique(answers),
        type=record.get("type"),
        difficulty=record.get("difficulty"),
        meta={k: v for k, v in record.items() if k not in known},
    )


# --- FreshQA CSV -------------------------------------------------------------------------


def read_freshqa(path: Path, split: str | None = None) -> Iterator[EvalItem]:
    """The sheet export: a warning line and a blank line come before the header row."""
    if split is not None and split.lower() not in FRESHQA_SPLITS:
        raise EvalInputError(f"--split must be one of {FRESHQA_SPLITS}, not {split!r}")
    with path.open(encoding="utf-8-sig", newline="") as fh:
        rows = csv.reader(fh)
        header = _freshqa_header(path, rows)
        for row in rows:
            if not any(cell.strip() for cell in row):
                continue
            line = rows.line_num
            if len(row) != len(header):
                raise EvalInputError(
                    f"{path}:{line}: {len(row)} cells, the header has {len(header)}"
                )
            item = _freshqa_item(dict(zip(header, row, strict=True)), path, line)
            if split is None or item.meta["split"].lower() == split.lower():
                yield item


def _freshqa_header(path: Path, rows: Iterator[list[str]]) -> list[str]:
    for row in rows:
        cells = [cell.strip() for cell in row]
        if cells[:1] == ["id"] and "question" in cells:
            missing = {"question", "split", FRESHQA_ANSWER_COLUMNS[0]} - set(cells)
            if missing:
                raise EvalInputError(f"{path}: FreshQA header lacks {sorted(missing)}")
            return cells
    raise EvalInputError(f"{path}: no FreshQA header row (id,split,question,...) found")


def _freshqa_item(row: dict[str, str], path: Path, line: int) -> EvalItem:
    answers = _unique(row.get(col, "") for col in FRESHQA_ANSWER_COLUMNS)
    if not row["question"].strip() or not answers:
        raise EvalInputError(f"{path}:{line}: a FreshQA row needs a question and answer_0")
    meta: dict[str, Any] = {col: row.get(col, "").strip() for col in FRESHQA_META_COLUMNS}
    meta["source"] = [url.strip() for url in meta["source"].splitlines() if url.strip()]
    return EvalItem(
        id=f"freshqa-{row['id'].strip()}", question=row["question"].strip(), answers=answers,
        meta=meta,
    )


# --- helpers -----------------------------------------------------------------------------


def _unique(texts: Iterator[str] | list[str]) -> list[str]:
    """Non-empty answers, stripped, first occurrence kept."""
    return list(dict.fromkeys(t.strip() for t in texts if t and t.strip()))


def _describe(exc: Exception) -> str:
    """One line: pydantic's field errors without its multi-line layout."""
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in exc.errors()[:3]
        )
    return str(exc)
