"""One writer per run directory: a command that writes into a run holds its lock until it ends.

Two commands writing one run at once pay every call twice and lose each other's lines (one's
atomic replace orphans the other's appends), so the second is refused, or waits when asked to.
The lock is the operating system's (`filelock`: flock on Unix), so it dies with its process and
a lock left by a killed command is simply taken over. The lock file also names its holder
(program, pid, since when) for the refusal; a clean exit empties it, so a name found in it on
taking the lock is that of a command that did not end cleanly.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock, Timeout

from cuqa_builder.errors import CuqaError
from cuqa_builder.jsonio import can_write_in
from cuqa_builder.records.base import Record

log = logging.getLogger(__name__)

LOCK_FILE = ".cuqa-lock"
WAIT_FOR_LOCK = "--wait-for-lock"


class RunBusy(CuqaError, RuntimeError):
    """Another command is writing the same run directory. Exit status 1."""


class LockHolder(Record):
    """What the lock file says about the command holding it."""

    program: str
    pid: int
    since: datetime  # UTC

    def working_on(self, directory: Path) -> str:
        return (f"another {self.program} (pid {self.pid}) is working on {directory} "
                f"since {_clock(self.since)}")


class RunLockError(CuqaError, OSError):
    """The run's lock cannot be taken: its directory cannot be written, or something else sits
    where the lock file belongs. Exit status 1."""


@contextmanager
def run_lock(directory: Path, program: str, *, wait: bool = False,
             read_only: bool = False) -> Iterator[None]:
    """Hold `directory`'s lock for the block. Held by another process: `RunBusy` naming it, or
    with `wait` a log line and a wait until it is free. The directory must exist. A command
    that writes nothing there (`read_only`) goes on without the lock when the directory cannot
    be written: nobody can write in it then."""
    path = directory / LOCK_FILE
    if read_only and not can_write_in(directory):
        log.debug("%s cannot be written: read without its lock", directory)
        yield
        return
    lock = FileLock(path)
    try:
        lock.acquire(blocking=False)
    except Timeout:  # (an OSError too: caught first)
        busy = _describe_holder(path, directory)
        if not wait:
            raise RunBusy(f"{busy}: let it finish, or add {WAIT_FOR_LOCK} to wait for it "
                          "(only one command at a time may write a run)") from None
        # a warning: shown under -q too, or a waiting command would look hung
        log.warning("%s: waiting for it to finish (%s)", busy, WAIT_FOR_LOCK)
        lock.acquire()
    except OSError as exc:
        raise RunLockError(_why_no_lock(path, program, exc)) from None
    try:
        if (left := _read_holder(path)) is not None:
            log.warning("took over the lock of %s (pid %d, since %s), which ended without "
                        "releasing it", left.program, left.pid, _clock(left.since))
        holder = LockHolder(program=program, pid=os.getpid(), since=datetime.now(timezone.utc))
        _write_note(path, holder.model_dump_json())
        yield
    finally:
        _write_note(path, "")
        lock.release()


def _why_no_lock(path: Path, program: str, exc: OSError) -> str:
    if path.is_dir():
        return (f"{path} is a directory, where the run's lock file belongs: move it aside "
                "(nothing in it is the run's)")
    return (f"{path.parent} cannot be written ({exc.strerror}): {program} writes into the run "
            f"and keeps its lock there ({LOCK_FILE}); make the directory writable, or work on "
            "a copy of the run")


def _describe_holder(path: Path, directory: Path) -> str:
    holder = _read_holder(path)
    # No name: the holder has just taken the lock and not yet written it.
    return holder.working_on(directory) if holder else f"another command is working on {directory}"


def _read_holder(path: Path) -> LockHolder | None:
    try:
        return LockHolder.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None


def _write_note(path: Path, text: str) -> None:
    # The note only serves messages: a platform whose lock bars writing the file keeps the
    # lock without it.
    with suppress(OSError):
        path.write_text(text, encoding="utf-8")


def _clock(moment: datetime) -> str:
    """Local HH:MM, with the date when it is not today."""
    local = moment.astimezone()
    today = datetime.now().astimezone().date()
    return local.strftime("%H:%M" if local.date() == today else "%Y-%m-%d %H:%M")
