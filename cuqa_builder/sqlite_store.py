"""The SQLite files that record paid calls (LLM calls, web searches): opened one way, and a file
that is not such a database is one clear error naming it, not a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cuqa_builder.errors import CuqaError
from cuqa_builder.jsonio import can_write_in


class CacheFileError(CuqaError, RuntimeError):
    """A cache file that SQLite cannot use (damaged, or another kind of file)."""


_CACHE_REMEDY = "move it aside to start a new cache, or run with --no-cache"


def open_store(path: Path, schema: str, remedy: str = _CACHE_REMEDY, *,
               read_only: bool = False) -> sqlite3.Connection:
    """Open (or create) the database at `path` with `schema` applied. Every statement commits
    on its own (one finished call = one commit), in WAL mode, so a killed process loses at most
    the calls in flight; other processes on the same file wait up to 30 s for a lock. `remedy`
    tells the user what to do with a file that is no such database. `read_only`: an existing
    database only read (a command that writes nothing, on a run it may not be able to write)."""
    if read_only:
        return _open_read_only(path, remedy)
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
        raise _unusable(path, exc, remedy) from None
    return db


def _open_read_only(path: Path, remedy: str) -> sqlite3.Connection:
    """Read-only. In a directory that cannot be written, SQLite cannot make the files a WAL
    database is read through: there the file is read as immutable (nothing can change it)."""
    try:
        try:
            return _connect(path, "ro")
        except sqlite3.OperationalError:
            # Only where nothing can write: immutable ignores the WAL file, so elsewhere it
            # would miss the latest calls and is unsafe beside a writer.
            if can_write_in(path.parent):
                raise
            return _connect(path, "ro&immutable=1")
    except sqlite3.DatabaseError as exc:
        raise _unusable(path, exc, remedy) from None


def _connect(path: Path, mode: str) -> sqlite3.Connection:
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode={mode}", uri=True,
                         isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA busy_timeout = 30000")
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db


def _unusable(path: Path, exc: sqlite3.DatabaseError, remedy: str) -> CacheFileError:
    return CacheFileError(f"{path} is not a usable cache database ({exc}): {remedy}")
