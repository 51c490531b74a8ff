"""A good output is never replaced by an empty or much smaller one unless the user says so.

A re-run over bad input (an empty export, an empty snapshot) "succeeds" with nothing; writing that
result would silently throw away work. The caller picks which of the old records count (say, only
the reviewed ones) and offers `--force`; the error names what would have been dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cuqa_builder.errors import CuqaError

KEEP_AT_LEAST = 0.5  # a new output with fewer than half the old records is "much smaller"
_SHOWN = 5  # record ids an error names before "and N more"


class ShrinkError(CuqaError, RuntimeError):
    pass


def shrinks(old_ids: Sequence[str], new_ids: Sequence[str]) -> bool:
    return bool(old_ids) and len(new_ids) < len(old_ids) * KEEP_AT_LEAST


def refuse_shrinking(
    path: Path, old_ids: Sequence[str], new_ids: Sequence[str], *, noun: str, why: str = ""
) -> None:
    """Raise ShrinkError when the new records would empty or more than halve the old ones."""
    if not shrinks(old_ids, new_ids):
        return
    kept = set(new_ids)
    dropped = [record for record in old_ids if record not in kept]
    named = ", ".join(dropped[:_SHOWN]) + (
        f" and {len(dropped) - _SHOWN} more" if len(dropped) > _SHOWN else ""
    )
    because = f" ({why})" if why else ""
    raise ShrinkError(
        f"not replacing {path}: its {len(old_ids)} {noun} would become {len(new_ids)}{because}, "
        f"dropping {named}; pass --force to write it anyway"
    )
