"""Crash-safe file I/O at the edges of every stage.

Records are appended one JSON line at a time and flushed, so a killed run keeps every finished
record; a half-written last line (the process died mid-write) is ignored on read. Whole files are
replaced atomically through a temporary file and a rename.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

from pydantic import BaseModel, ValidationError

from cuqa_builder.errors import CuqaError, describe_validation_error

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


class JsonlError(CuqaError, ValueError):
    """A line of a JSONL file that is not the record expected there (named by path:line)."""


def can_write_in(directory: Path) -> bool:
    """Whether a file can be made in `directory` (the permission bits alone do not say: root
    ignores them, a read-only mount does not)."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False


def iter_jsonl(
    path: Path, model: type[M], lines: Container[int] | None = None
) -> Iterator[M]:
    """Yield typed records; a truncated final line (from a kill) is skipped with a warning.

    Any other bad line raises JsonlError naming the file, the line and the first problem. With
    `lines` (line numbers, from 1), only those lines are read as records; the rest are skipped
    unparsed (a later pass over a large file that an earlier one has sorted out).
    """
    for _, record in numbered_jsonl(path, model, lines):
        yield record


def numbered_jsonl(
    path: Path, model: type[M], lines: Container[int] | None = None
) -> Iterator[tuple[int, M]]:
    """`iter_jsonl`, each record with its line number."""
    if not path.exists():
        return
    refuse_a_directory(path)
    with path.open(encoding="utf-8") as fh:  # line by line: a large file never sits in memory
        for number, line in enumerate(fh, start=1):
            if lines is not None and number not in lines:
                continue
            if not line.strip():
                continue
            if not line.endswith("\n"):  # only the last line can lack its newline
                log.warning("%s: ignoring an unfinished last line (interrupted run)", path)
                return
            yield number, _record(path, number, line, model)


def _record(path: Path, number: int, line: str, model: type[M]) -> M:
    try:
        return model.model_validate_json(line)
    except ValidationError as exc:
        raise JsonlError(f"{path}:{number}: not a valid {model.__name__} record "
                         f"({describe_validation_error(exc, shown=1)})") from None


def read_jsonl(path: Path, model: type[M]) -> list[M]:
    return list(iter_jsonl(path, model))


class JsonFileError(CuqaError, ValueError):
    """A JSON file that cannot be read as the record expected there."""


def read_model(
    path: Path, model: type[M], what: str, *, shown: str | None = None,
    error: type[Exception] = JsonFileError,
) -> M:
    """A whole JSON file as `model`. An unreadable or invalid file is `error` with one line:
    "cannot read SHOWN: why" or "SHOWN is not WHAT (field: problem)"; SHOWN is the path unless
    given (e.g. the flag that named it)."""
    shown = shown or str(path)
    try:
        return model.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise error(f"cannot read {shown}: {exc.strerror}") from None
    except ValidationError as exc:
        raise error(f"{shown} is not {what} ({describe_validation_error(exc)})") from None


def refuse_a_directory(path: Path) -> None:
    """A directory where a run's file belongs is one clear error saying what to do (not
    "[Errno 21] Is a directory")."""
    if path.is_dir():
        raise JsonlError(f"{path} is a directory, where the run's {path.name} belongs: move it "
                         "aside (nothing in it is the run's) and run the command again")


class JsonlAppender:
    """Append records to a JSONL file, one flushed line each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        refuse_a_directory(path)
        _drop_unfinished_tail(path)
        self._fh: IO[str] = path.open("a", encoding="utf-8")

    def append(self, record: BaseModel) -> None:
        self._fh.write(record.model_dump_json() + "\n")
        self._fh.flush()

    def append_all(self, records: Sequence[BaseModel]) -> None:
        """Several records as one write (one system call): a killed process leaves all of them
        or none, never the first alone (an event's items are done together or not at all)."""
        data = "".join(r.model_dump_json() + "\n" for r in records).encode("utf-8")
        self._fh.flush()
        os.write(self._fh.fileno(), data)

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_unfinished_tail(path: Path) -> None:
    """Cut a partial last line so the next append starts on a fresh line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    with path.open("r+b") as fh:
        fh.truncate(keep)


def _file_mode() -> int:
    """The mode an ordinary `open` would give a new file: outputs are meant to be shared (a
    release above all), not kept owner-only like the temporary file they are written through.
    The umask is read from /proc where it can be, since setting it to read it is not thread-safe."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    current = os.umask(0o022)
    os.umask(current)
    return 0o666 & ~current


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            os.fchmod(fh.fileno(), _file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def count_records(path: Path) -> int:
    """Non-empty lines of a JSONL file (0 when it does not exist), without parsing them."""
    if not path.exists():
        return 0
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.strip())


def keep_latest(path: Path, key: type[M], key_of: Callable[[M], str]) -> int:
    """Rewrite a JSONL file keeping only the last record of each key (a record made again
    replaces the one before); returns how many were dropped, and rewrites nothing when none
    is. The keys are read first (`key`: a model of the few fields that make it), then the
    lines kept are copied as they are, in one atomic replace; an unfinished last line (a kill)
    is dropped with the warning `numbered_jsonl` gives."""
    last: dict[str, int] = {}
    lines = 0
    for number, record in numbered_jsonl(path, key):
        last[key_of(record)] = number
        lines += 1
    if lines == len(last) and not _unfinished(path):
        return 0
    kept = set(last.values())
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out, path.open(encoding="utf-8") as fh:
            out.writelines(line for number, line in enumerate(fh, start=1)
                           if number in kept and line.endswith("\n"))
            os.fchmod(out.fileno(), _file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return lines - len(last)


def _unfinished(path: Path) -> bool:
    """Whether the file's last line lacks its newline (a process killed while writing it)."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    with path.open("rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) != b"\n"


def write_jsonl(path: Path, records: Iterable[BaseModel]) -> int:
    """Replace a whole JSONL file atomically; returns the number of lines written."""
    lines = [r.model_dump_json() for r in records]
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(lines)
