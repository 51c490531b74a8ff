"""SQLite cache and log of LLM calls: a repeated request is answered from here, never sent twice.

One row per distinct request, keyed by the sha256 of the canonical JSON of everything that shapes
the answer (model, messages, every sampling parameter). Each finished call is committed on its
own (WAL journal), so killing the process loses at most the calls still in flight. Rows also count
their cache hits, which is enough to summarise a run. Only the request and the endpoint's JSON
body are stored: never headers, keys or endpoint URLs.
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel

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
    hits INTEGER NOT NULL DEFAULT 0,
    last_hit_at TEXT
)
"""

# Recorded beside the call, not part of what the model sees.
_NOT_SENT = frozenset({"template", "template_hash"})


def canonical_request(model: str, request: ChatRequest, api: str = "chat") -> str:
    sent = request.model_dump(exclude=_NOT_SENT)
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
    response: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost: float
    template: str | None
    template_hash: str | None
    created_at: str
    hits: int


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

    def __init__(self, path: Path) -> None:
        self._db = open_store(path, _SCHEMA)
        self._lock = threading.Lock()

    def get(self, key: str) -> CachedCall | None:
        with self._lock:
            row = self._db.execute(
                "SELECT key, model, response, prompt_tokens, completion_tokens, latency_s, cost,"
                " template, template_hash, created_at, hits FROM calls WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        fields = dict(zip(CachedCall.model_fields, row, strict=True))
        fields["response"] = json.loads(fields["response"])
        return CachedCall.model_validate(fields)

    def count_hit(self, key: str) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE calls SET hits = hits + 1, last_hit_at = ? WHERE key = ?", (_now(), key)
            )

    def put(
        self,
        key: str,
        *,
        model: str,
        canonical_request: str,
        response_json: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_s: float,
        cost: float,
        template: str | None,
        template_hash: str | None,
    ) -> None:
        """Store (or, on a refresh, replace) a finished call."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO calls (key, model, request, response, prompt_tokens,"
                " completion_tokens, latency_s, cost, template, template_hash, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key, model, canonical_request, response_json, prompt_tokens,
                    completion_tokens, latency_s, cost, template, template_hash, _now(),
                ),
            )

    def summary(self) -> CacheSummary:
        with self._lock:
            row = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(hits), 0), COALESCE(SUM(prompt_tokens), 0),"
                " COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(cost), 0.0) FROM calls"
            ).fetchone()
        return CacheSummary.model_validate(dict(zip(CacheSummary.model_fields, row, strict=True)))

    def close(self) -> None:
        with self._lock:
            self._db.close()
