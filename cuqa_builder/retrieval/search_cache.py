"""SQLite cache and log of web searches: a search is paid, so a repeated one is answered from here.

Kept in the same file as the LLM calls (its own table), so one cache file replays a whole
evaluation. One row per distinct search, keyed by the sha256 of the canonical JSON of the service,
its endpoint, the query and the number of results; only the service's JSON answer is stored
(never a header or key), with what it cost and how often it was reused.
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cuqa_builder.sqlite_store import open_store

_SCHEMA = """
CREATE TABLE IF NOT EXISTS searches (
    key TEXT PRIMARY KEY,
    service TEXT NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    latency_s REAL NOT NULL,
    cost REAL NOT NULL,
    created_at TEXT NOT NULL,
    hits INTEGER NOT NULL DEFAULT 0,
    last_hit_at TEXT
)
"""


def search_key(request: dict[str, Any]) -> tuple[str, str]:
    """The canonical JSON of a search request and its sha256."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return canonical, hashlib.sha256(canonical.encode()).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class SearchCache:
    """Safe to share between threads (searches run in worker threads): one connection, a lock."""

    def __init__(self, path: Path) -> None:
        self._db = open_store(path, _SCHEMA)
        self._lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer (its hit counted), or None."""
        with self._lock:
            row = self._db.execute("SELECT response FROM searches WHERE key = ?",
                                   (key,)).fetchone()
            if row is not None:
                self._db.execute("UPDATE searches SET hits = hits + 1, last_hit_at = ? "
                                 "WHERE key = ?", (_now(), key))
        return None if row is None else json.loads(row[0])

    def put(self, key: str, *, service: str, canonical_request: str, response_json: str,
            latency_s: float, cost: float) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO searches (key, service, request, response, latency_s,"
                " cost, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, service, canonical_request, response_json, latency_s, cost, _now()),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()
