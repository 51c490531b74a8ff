"""The SQLite files that record paid calls (LLM calls, web searches): opened one way, and a file
that is not such a database is one clear error naming it, not a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cuqa_builder.errors import CuqaError


class CacheFileError(CuqaError, RuntimeError):
    """A cache file that SQLite cannot use (damaged, or another kind of file)."""


_CACHE_REMEDY = "move it aside to start a new cache, or run with --no-cache"


def open_store(path: Path, schema: str, remedy: str = _CACHE_REMEDY) -> sqlite3.Connection:
    """Open (or create) the database at `path` with `schema` applied. Every statement commits
    on its own (one finished call = one commit), in WAL mode, so a killed process loses at most
    the calls in flight; other processes on the same file wait up to 30 s for a lock. `remedy`
    tells the user what to do with a file that is no such database."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA busy_timeout = 30000")
        db.execute("PRAGMA journal_mode = WAL")
        # NORMAL survives a killed process (only a power cut can lose the last commits).
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute(schema)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise CacheFileError(
            f"{path} is not a usable cache database ({exc}): {remedy}"
        ) from None
    return db
