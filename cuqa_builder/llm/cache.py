"""SQLite cache and log of LLM calls: a repeated request is answered from here, never sent twice.

One row per distinct request, keyed by the sha256 of the canonical JSON of everything that shapes
the answer (model, messages, every sampling parameter). Each finished call is committed on its
own (WAL journal), so killing the process loses at most the calls still in flight. Rows also count
their cache hits, which is enough to summarise a run (hits are written a thousand at a time and
on close, so a killed process may lose the count of its last few: never an answer; they live in
a small table of their own, as rewriting a call's whole row per hit cost 8 times more). Only the
request and the endpoint's JSON body are stored: never headers, keys or endpoint URLs.

Batch rounds (`llm/batch/`) record their submissions and failures here too
(`cache_batches.py`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Json

from cuqa_builder.llm.cache_batches import BATCH_TABLES, BatchRecords, timestamp
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
    *BATCH_TABLES,
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


class CallCache(BatchRecords):
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
            self._hits.append((timestamp(), key))
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

    def put_many(self, rows: list[CallRow]) -> None:
        """Store many finished calls (a batch's answers) in one transaction."""
        now = timestamp()
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
