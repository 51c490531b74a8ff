"""What the call cache records of batch rounds (`llm/batch/`): every batch they submit, with the
keys of its requests, recorded before they wait for it, so that a killed process that asks again
finds the batch and waits for it instead of paying for the same requests twice. A Batch API
submission is recorded as soon as its input file is uploaded ("uploaded", under the file's id)
and takes its batch's id once the batch is created ("open"): a process killed in between finds
the batch by its input file. A submission's request rows are dropped once its answers are in the
`calls` table. The rounds that failed a call are counted here too, over every command, until it
is answered: a call that failed in every round `--max-retries` allows fails at once in every
later command."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, Field

# Created beside the `calls` table by `CallCache`.
BATCH_TABLES = (
    """
CREATE TABLE IF NOT EXISTS batch_submissions (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    model TEXT NOT NULL,
    input TEXT NOT NULL,
    requests INTEGER NOT NULL,
    state TEXT NOT NULL,
    created_at TEXT NOT NULL,
    closed_at TEXT,
    answered INTEGER  -- its requests answered (the others failed), once it is closed
)""",
    """
CREATE TABLE IF NOT EXISTS batch_failures (
    key TEXT PRIMARY KEY,
    rounds INTEGER NOT NULL,  -- rounds that failed this call, over every command
    error TEXT  -- the error its item failed with, once it failed for good
)""",
    """
CREATE TABLE IF NOT EXISTS batch_requests (
    submission TEXT NOT NULL,
    key TEXT NOT NULL,
    request TEXT NOT NULL,
    template TEXT,
    template_hash TEXT,
    PRIMARY KEY (submission, key)
)""",
)


def timestamp() -> str:
    """A row's time stamp (UTC, to the millisecond)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class Submission(BaseModel):
    """One batch input file handed to a provider (`kind` "api": `id` is its batch id) or to an
    offline engine (`kind` "files": `id` is the input file's path)."""

    id: str
    kind: str
    model: str
    input: str = Field(description="the provider's input file id, or the local input file")
    requests: int
    # "uploaded" (a Batch API input file whose batch may not exist yet: `id` is the file's),
    # "open" until its answers are stored, then "closed".
    state: Literal["uploaded", "open", "closed"] = "open"
    answered: int | None = Field(default=None, description="once closed: requests answered")


@dataclass(frozen=True)
class FailedLine:
    """A call a round answered with a failure: it has now failed in at least `rounds` rounds
    (1 more than before; a refused call uses up every round it may have at once)."""

    key: str
    rounds: int = 1


class SubmittedRequest(BaseModel):
    """What the cache needs to store an answer that comes back from a batch."""

    key: str
    request: str  # the canonical request
    template: str | None = None
    template_hash: str | None = None


class BatchRecords:
    """`CallCache`'s records of batch rounds: its connection and lock are the cache's."""

    _db: sqlite3.Connection
    _lock: threading.Lock

    def _add_missing_columns(self) -> None:
        """Columns of the batch tables a cache file made by an earlier version lacks."""
        for table, column, kind in (("batch_failures", "error", "TEXT"),
                                    ("batch_submissions", "answered", "INTEGER")):
            columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in columns:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


    def open_batch(self, submission: Submission, requests: list[SubmittedRequest]) -> None:
        """Record a submitted batch and its requests, in one transaction."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO batch_submissions (id, kind, model, input, requests,"
                    " state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (submission.id, submission.kind, submission.model, submission.input,
                     submission.requests, submission.state, timestamp()),
                )
                self._db.executemany(
                    "INSERT OR REPLACE INTO batch_requests (submission, key, request, template,"
                    " template_hash) VALUES (?, ?, ?, ?, ?)",
                    ((submission.id, r.key, r.request, r.template, r.template_hash)
                     for r in requests),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def open_batches(self, kind: str, model: str | None, state: str = "open"
                     ) -> list[Submission]:
        """The submissions of `kind` in `state`, of `model` (None: of every model)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, kind, model, input, requests, state, answered FROM batch_submissions"
                " WHERE state = ? AND kind = ? AND model = COALESCE(?, model)"
                " ORDER BY created_at, id",
                (state, kind, model),
            ).fetchall()
        return [Submission.model_validate(dict(zip(Submission.model_fields, row, strict=True)))
                for row in rows]

    def batch_keys(self, submission: str) -> set[str]:
        """The keys of a submission's requests (without the requests, which are large)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT key FROM batch_requests WHERE submission = ?", (submission,)
            ).fetchall()
        return {key for key, in rows}

    def batch_requests(self, submission: str) -> dict[str, SubmittedRequest]:
        with self._lock:
            rows = self._db.execute(
                "SELECT key, request, template, template_hash FROM batch_requests"
                " WHERE submission = ?", (submission,),
            ).fetchall()
        return {row[0]: SubmittedRequest(key=row[0], request=row[1], template=row[2],
                                         template_hash=row[3]) for row in rows}

    def batch_created(self, uploaded: str, batch_id: str) -> Submission:
        """The batch of an "uploaded" submission exists: the submission takes its id."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.execute("UPDATE batch_submissions SET id = ?, state = 'open' WHERE id = ?",
                             (batch_id, uploaded))
            self._db.execute("UPDATE batch_requests SET submission = ? WHERE submission = ?",
                             (batch_id, uploaded))
            self._db.execute("COMMIT")
            row = self._db.execute(
                "SELECT id, kind, model, input, requests, state, answered FROM batch_submissions"
                " WHERE id = ?", (batch_id,),
            ).fetchone()
        return Submission.model_validate(dict(zip(Submission.model_fields, row, strict=True)))

    def close_batch(self, submission: str, answered: int) -> None:
        """Its answers are stored: forget its requests, keep the record of the batch and how
        many of them it answered."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.execute("UPDATE batch_submissions SET state = 'closed', closed_at = ?,"
                             " answered = ? WHERE id = ?", (timestamp(), answered, submission))
            self._db.execute("DELETE FROM batch_requests WHERE submission = ?", (submission,))
            self._db.execute("COMMIT")

    def batch_failed(self, failed: list[FailedLine]) -> dict[str, int]:
        """Count one more round that failed each call (at least `rounds`); returns each call's
        count. Kept here, not in the process: with batch files every round is read by another
        command."""
        if not failed:
            return {}
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT INTO batch_failures (key, rounds) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET rounds = MAX(rounds + 1, excluded.rounds)",
                ((f.key, f.rounds) for f in failed))
            self._db.execute("COMMIT")
            return {f.key: self._db.execute("SELECT rounds FROM batch_failures WHERE key = ?",
                                            (f.key,)).fetchone()[0] for f in failed}

    def batch_failed_for_good(self, errors: dict[str, str]) -> None:
        """The error each call failed its item with, once it failed in every round it may."""
        if not errors:
            return
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("UPDATE batch_failures SET error = ? WHERE key = ?",
                                 ((error, key) for key, error in errors.items()))
            self._db.execute("COMMIT")

    def batch_failure(self, key: str) -> tuple[int, str | None] | None:
        """(rounds that failed the call, the error it failed for good with), or None."""
        with self._lock:
            row = self._db.execute("SELECT rounds, error FROM batch_failures WHERE key = ?",
                                   (key,)).fetchone()
        return None if row is None else (row[0], row[1])

    def any_batch_failure(self) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM batch_failures LIMIT 1").fetchone() is not None

    def forget_batch_failures(self, keys: list[str]) -> None:
        """The calls were answered: a later failure starts their count afresh."""
        with self._lock:
            if self._db.execute("SELECT 1 FROM batch_failures LIMIT 1").fetchone() is None:
                return  # nothing ever failed: no write per answered call
            self._db.execute("BEGIN")
            self._db.executemany("DELETE FROM batch_failures WHERE key = ?",
                                 ((k,) for k in keys))
            self._db.execute("COMMIT")

    def batch_count(self, kind: str) -> int:
        with self._lock:
            return self._db.execute(
                "SELECT COUNT(*) FROM batch_submissions WHERE kind = ?", (kind,)
            ).fetchone()[0]
