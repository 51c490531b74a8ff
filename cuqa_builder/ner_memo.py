"""The entities spaCy found in a text, kept on disk: a run that resumes (each `--batch-files`
round replays its events from the call cache) finds the entities of a known passage it has seen
instead of running NER on it again, and finds the very ones it drew k_ent from before.

One row per (spaCy pipeline name, sha256 of the text), committed as soon as it is found (WAL),
read back as typed `Entity` records.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from pydantic import TypeAdapter

from cuqa_builder.records.events import Entity
from cuqa_builder.sqlite_store import open_store

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entities (
    pipeline TEXT NOT NULL,
    text_sha256 TEXT NOT NULL,
    entities TEXT NOT NULL,
    PRIMARY KEY (pipeline, text_sha256)
)
"""

_ENTITIES = TypeAdapter(list[Entity])


class NerMemo:
    """Safe to share between threads: one connection behind a lock."""

    def __init__(self, path: Path, pipeline: str) -> None:
        self._db = open_store(
            path, _SCHEMA, remedy="move it aside: the entities are found again as they are needed"
        )
        self._pipeline = pipeline
        self._lock = threading.Lock()

    def get(self, text: str) -> list[Entity] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT entities FROM entities WHERE pipeline = ? AND text_sha256 = ?",
                (self._pipeline, _digest(text)),
            ).fetchone()
        return None if row is None else _ENTITIES.validate_json(row[0])

    def put(self, text: str, entities: list[Entity]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO entities (pipeline, text_sha256, entities)"
                " VALUES (?, ?, ?)",
                (self._pipeline, _digest(text), _ENTITIES.dump_json(entities).decode()),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
