"""SQLite cache and log of LLM calls: a repeated request is answered from here, never sent twice.

One row per distinct request, keyed by the sha256 of the canonical JSON of everything that shapes
the answer (model, messages, every sampling parameter). Each finished call is committed on its
own (WAL journal), so killing the process loses at most the calls still in flight. Rows also count
their cache hits, which is enough to summarise a run (hits are written a thousand at a time and
on close, so a killed process may lose the count of its last few: never an answer; they live in
a small table of their own, as rewriting a call's whole row per hit cost 8 times more). Only the
request and the endpoint's JSON body are stored: never headers, keys or endpoint URLs.

Batch rounds (`llm/batch.py`) also record here every batch they submit, with the keys of its
requests, before they wait for it: a killed process that asks again finds the batch and waits
for it instead of paying for the same requests twice. A Batch API submission is recorded as soon
as its input file is uploaded ("uploaded", under the file's id) and takes its batch's id once
the batch is created ("open"): a process killed in between finds the batch by its input file.
A submission's request rows are dropped once its answers are in the `calls` table. The rounds
that failed a call are counted here too, over every command, until it is answered: a call that
failed in every round `--max-retries` allows fails at once in every later command.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, Json

from cuqa_builder.llm.types import ChatRequest
from cuqa_builder.sqlite_store import open_store

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    cost REAL NOT NULL,
    template TEXT,
    template_hash TEXT,
    created_at TEXT NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0,  -- counted here by files made before `call_hits`
    last_hit_at TEXT
)
"""

_MORE_TABLES = (
    """
CREATE TABLE IF NOT EXISTS call_hits (
    key TEXT PRIMARY KEY,
    hits INTEGER NOT NULL,
    last_hit_at TEXT NOT NULL
)""",
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

HIT_FLUSH = 1000  # hits counted in memory before they are written

# Recorded beside the call, not part of what the model sees.
_NOT_SENT = frozenset({"template", "template_hash", "reply_schema", "response_format"})
_SENT = tuple(name for name in ChatRequest.model_fields if name not in _NOT_SENT)


def canonical_request(model: str, request: ChatRequest, api: str = "chat") -> str:
    # The fields as they are (what `model_dump` would give for these plain types, at a fraction
    # of its cost: a resumed batch run computes hundreds of thousands of keys).
    sent = {name: getattr(request, name) for name in _SENT}
    # Only a model held to a reply format is sent one: every other key stays what it was.
    if request.response_format is not None:
        sent["response_format"] = request.response_format
    # The completions endpoint answers the same prompt differently: its calls get keys of
    # their own, while chat keys stay what they always were.
    endpoint = {} if api == "chat" else {"api": api}
    return json.dumps(
        {"model": model, **endpoint, **sent}, sort_keys=True, separators=(",", ":"),
        ensure_ascii=False,
    )


def request_key(canonical: str) -> str:
    return hashlib.sha256(canonical.encode()).hexdigest()


class CachedCall(BaseModel):
    key: str
    model: str
    response: Json[dict[str, Any]]  # stored as the endpoint's JSON text
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost: float
    template: str | None
    template_hash: str | None
    created_at: str


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


@dataclass(frozen=True)
class CallSample:
    template: str | None
    prompt_chars: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float


def _prompt_chars(canonical: str) -> int:
    """Characters of the messages' text in a canonical request."""
    messages = json.loads(canonical).get("messages") or []
    return sum(len(str(m.get("content") or "")) for m in messages)


@dataclass(frozen=True)
class CallRow:
    """One finished call as `put` stores it."""

    key: str
    model: str
    canonical_request: str
    response_json: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost: float
    template: str | None
    template_hash: str | None


class CacheSummary(BaseModel):
    """Totals over the whole cache file (every run that used it)."""

    calls: int = 0
    hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class CallCache:
    """Safe to share between threads and coroutines: one connection behind a lock."""

    def __init__(self, path: Path, read_only: bool = False) -> None:
        """`read_only`: an existing cache only read (`--estimate` writes nothing)."""
        self._db = open_store(path, _SCHEMA, read_only=read_only)
        self._lock = threading.Lock()
        self._hits: list[tuple[str, str]] = []  # (when, key) not yet written
        with self._lock:
            for statement in () if read_only else _MORE_TABLES:
                self._db.execute(statement)
            if not read_only:
                self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        """Columns a cache file made by an earlier version lacks."""
        for table, column, kind in (("batch_failures", "error", "TEXT"),
                                    ("batch_submissions", "answered", "INTEGER")):
            columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if column not in columns:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def get(self, key: str) -> CachedCall | None:
        with self._lock:
            row = self._db.execute(
                "SELECT key, model, response, prompt_tokens, completion_tokens, latency_s, cost,"
                " template, template_hash, created_at FROM calls WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        return CachedCall.model_validate(dict(zip(CachedCall.model_fields, row, strict=True)))

    def count_hit(self, key: str) -> None:
        """Count a hit; hits are written in groups (one write per hit would cost more than
        the hit saves: a resumed batch run replays hundreds of thousands)."""
        with self._lock:
            self._hits.append((_now(), key))
            if len(self._hits) < HIT_FLUSH:
                return
        self.flush_hits()

    def flush_hits(self) -> None:
        with self._lock:
            hits, self._hits = self._hits, []
            if hits:
                self._db.execute("BEGIN")
                self._db.executemany(
                    "INSERT INTO call_hits (last_hit_at, key, hits) VALUES (?, ?, 1)"
                    " ON CONFLICT (key) DO UPDATE SET hits = hits + 1,"
                    " last_hit_at = excluded.last_hit_at", hits,
                )
                self._db.execute("COMMIT")

    def put(self, row: CallRow) -> None:
        """Store (or, on a refresh, replace) a finished call."""
        self.put_many([row])

    def open_batch(self, submission: Submission, requests: list[SubmittedRequest]) -> None:
        """Record a submitted batch and its requests, in one transaction."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO batch_submissions (id, kind, model, input, requests,"
                    " state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (submission.id, submission.kind, submission.model, submission.input,
                     submission.requests, submission.state, _now()),
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
                             " answered = ? WHERE id = ?", (_now(), answered, submission))
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

    def put_many(self, rows: list[CallRow]) -> None:
        """Store many finished calls (a batch's answers) in one transaction."""
        now = _now()
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO calls (key, model, request, response, prompt_tokens,"
                    " completion_tokens, latency_s, cost, template, template_hash, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    ((r.key, r.model, r.canonical_request, r.response_json, r.prompt_tokens,
                      r.completion_tokens, r.latency_s, r.cost, r.template, r.template_hash, now)
                     for r in rows),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def samples(self, model: str, limit: int = 2000) -> list[CallSample]:
        """The latest finished calls of `model` (what `--estimate` calibrates itself on)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT template, request, prompt_tokens, completion_tokens, latency_s FROM calls"
                " WHERE model = ? ORDER BY created_at DESC LIMIT ?", (model, limit),
            ).fetchall()
        return [CallSample(template=t, prompt_chars=_prompt_chars(r), prompt_tokens=p,
                           completion_tokens=c, latency_s=lat) for t, r, p, c, lat in rows]

    def summary(self) -> CacheSummary:
        self.flush_hits()
        with self._lock:
            row = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(hits), 0)"
                " + (SELECT COALESCE(SUM(hits), 0) FROM call_hits),"
                " COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0),"
                " COALESCE(SUM(cost), 0.0) FROM calls"
            ).fetchone()
        return CacheSummary.model_validate(dict(zip(CacheSummary.model_fields, row, strict=True)))

    def close(self) -> None:
        self.flush_hits()
        with self._lock:
            self._db.close()
