"""Running calls together so that none is lost: every one finishes (and its answer is cached)
before the first failure is raised, so a re-run never pays twice for a call that was answered
while another failed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def all_finished(*calls: Awaitable[T]) -> list[T]:
    """`asyncio.gather` of `calls`, each run to its end; then the first failure, if any."""
    found = await asyncio.gather(*calls, return_exceptions=True)
    for outcome in found:
        if isinstance(outcome, BaseException):
            raise outcome
    return list(found)  # type: ignore[arg-type]
