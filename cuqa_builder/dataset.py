"""Load a released CuQA dataset as typed items: `cuqa_builder.load("output/NAME")`.

Unlike the pipeline's own reader, a released file is expected to be whole: any line that is not
a valid item is an error that names the file, the line and what is wrong with it.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from cuqa_builder.errors import CuqaError, describe_validation_error
from cuqa_builder.records.items import CuqaItem
from cuqa_builder.run import DATASET

SUBSET_PREFIX = "cutoff-"  # a multi-cutoff release's subset folders: cutoff-2023-10/


class DatasetError(CuqaError, ValueError):
    """A dataset file that cannot be read as CuQA items."""


def _dataset_file(path: Path, cutoff: str | None = None) -> Path:
    """A JSONL file as given, or the `cuqa.jsonl` of a release (or run) folder, or of one
    cutoff's subset of a multi-cutoff release (`cutoff-LABEL/cuqa.jsonl`)."""
    if path.is_dir():
        subsets = sorted(p.parent.name.removeprefix(SUBSET_PREFIX)
                         for p in path.glob(f"{SUBSET_PREFIX}*/{DATASET}"))
        if cutoff is not None:
            path = path / f"{SUBSET_PREFIX}{cutoff}"
        elif subsets and not (path / DATASET).is_file():
            raise DatasetError(
                f"{path} is a release with one subset per cutoff: load(path, cutoff=...) with "
                f"one of {', '.join(subsets)}"
            )
        path = path / DATASET
    if not path.is_file():
        raise FileNotFoundError(f"no CuQA dataset at {path}")
    return path


def _item(line: str) -> CuqaItem:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    try:
        return CuqaItem.model_validate(data)
    except ValidationError as exc:
        raise DatasetError(describe_validation_error(exc, shown=1)) from None


def load(path: str | Path, cutoff: str | None = None) -> list[CuqaItem]:
    """Every item of a `cuqa.jsonl` file or a release folder, in file order; `cutoff` picks
    one subset of a multi-cutoff release."""
    source = _dataset_file(Path(path), cutoff)
    items = []
    with source.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                items.append(_item(line))
            except DatasetError as exc:
                raise DatasetError(f"{source}:{number}: {exc}") from None
    return items
