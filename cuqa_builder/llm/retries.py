"""How the gateway retries: which failures are worth another try, how long to wait between
tries (exponential back-off with jitter, or as long as the server's `Retry-After` asks), and
the loop that gives up after `--max-retries`."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timezone
from typing import TypeVar

from cuqa_builder.llm.types import GatewayStats, LLMError

# The retries are the gateway's: their warnings carry its name in the log.
log = logging.getLogger("cuqa_builder.llm.gateway")

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 20.0
RETRY_AFTER_CAP_S = 60.0
RETRYABLE_STATUS = frozenset({408, 409, 429})
T = TypeVar("T")


class Retryable(Exception):
    """One failed attempt worth repeating; `wait_s` is the server's Retry-After, if any."""

    def __init__(self, reason: str, wait_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait_s = wait_s


def worth_retrying(status: int) -> bool:
    """Whether an HTTP status is a failure that another try may not meet."""
    return status in RETRYABLE_STATUS or status >= 500


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]], *, tries: int, model: str, stats: GatewayStats,
    stop: Callable[[], bool],
) -> T:
    """`attempt()` until it does not raise `Retryable`, at most `tries` times (fewer once
    `stop()` says so); then an `LLMError` with the last reason, counted as a failure."""
    done = 0
    while True:
        try:
            return await attempt()
        except Retryable as failure:
            done += 1
            if done == tries or stop():
                stats.failures += 1
                raise LLMError(
                    f"{model}: call failed after {tries} tries: {failure.reason}",
                    model=model,
                ) from None
            wait = backoff_s(done - 1, failure.wait_s)
            log.warning("%s: %s; retrying in %.1f s (try %d of %d)",
                        model, failure.reason, wait, done + 1, tries)
            await asyncio.sleep(wait)
def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, or `Retry-After` (seconds/date)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            continue
        return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    return None


def backoff_s(attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(retry_after, RETRY_AFTER_CAP_S)
    # Full exponential step with jitter, so that many callers failing together spread out.
    return min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt) * random.uniform(0.5, 1.0)
